"""The `adaptrubric distill` subcommands (`collect`, `plan`, `train`, `evaluate`, `merge`), registered
into the main parser by `cli/` through `add_subcommands(sub)`. Argument handling only; the work is
in `adaptrubric_local.distill`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from ..distill.collect import CollectConfig, collect, teacher_pipeline
from ..distill.config import config_from_args
from ..distill.plan import format_plan
from ..distill.train import add_train_args, dry_run, train
from ..engine.hf_config import HFEngineConfig
from ..engine.teacher import TeacherConfig
from ..flags import add_config_arguments, common, config_kwargs
from ..formats.stream import as_stream, stream_trajectories, trajectories
from ..pipeline import PipelineConfig
from .common import add_command, add_data_argument, add_labels_options, add_out_option, data_options, load_labelled

EXAMPLES = """examples:
  # 1. collect a teacher's judgments (exactly one teacher)
  adaptrubric distill collect DATA --out runs/distill --teacher-url http://judge:8000/v1 \\
      --teacher-name Qwen/Qwen3-VL-235B-A22B-Thinking --concurrency 16 --teacher-max-new-tokens 8192
      # the key, if the endpoint needs one, is read from $OPENAI_API_KEY (or --api-key-env NAME)
  adaptrubric distill collect DATA --out runs/distill --teacher-model Qwen/Qwen3-VL-32B-Instruct
  adaptrubric distill collect DATA --out runs/distill --teacher-verdicts judge_verdicts.jsonl
  adaptrubric distill collect DATA --out runs/distill --teacher-labels --balance
  adaptrubric distill collect DATA --out runs/distill --teacher-labels --labels labels.jsonl   # the review page's
  adaptrubric distill collect DATA --out runs/distill --teacher-url ... --resume   # finish a run
  # 2. plan the memory, then train a LoRA (or QLoRA) student
  adaptrubric distill plan runs/distill --model Qwen/Qwen3-VL-4B-Instruct --gpu-memory 24GB
  adaptrubric distill train runs/distill --model Qwen/Qwen3-VL-4B-Instruct --out checkpoints/judge-4b
  adaptrubric distill train runs/distill --config training/qwen3vl-8b-qlora.yaml --out checkpoints/judge-8b-q
  accelerate launch --config_file training/accelerate-4gpu.yaml -m adaptrubric_local.distill.train runs/distill \\
      --config training/qwen3vl-8b-lora.yaml --out checkpoints/x
  # 3. compare base and student on the held-out tasks, then use it
  adaptrubric distill evaluate runs/distill --model Qwen/Qwen3-VL-4B-Instruct --adapter checkpoints/judge-4b \\
      --out runs/distill-eval
  adaptrubric score DATA --model Qwen/Qwen3-VL-4B-Instruct --adapter checkpoints/judge-4b --out verdicts.jsonl
  adaptrubric distill merge --model Qwen/Qwen3-VL-4B-Instruct --adapter checkpoints/judge-4b --out merged/judge-4b
"""


def _collect_teacher(args, pcfg_for, loaded):
    """(teacher engine, manifest description, pipeline config, per-trajectory configs or None)."""
    from ..distill.collect import label_teacher, load_teacher_verdicts, verdict_groups, verdicts_teacher

    tcfg = TeacherConfig(**config_kwargs(args, TeacherConfig))
    if sum(map(bool, (tcfg.teacher_model, tcfg.teacher_url, args.teacher_verdicts, args.teacher_labels))) != 1:
        raise ValueError("give exactly one teacher: --teacher-model, --teacher-url, --teacher-verdicts or "
                         "--teacher-labels")
    if tcfg.kind:
        return tcfg.build(), tcfg.describe(), pcfg_for(tcfg.kind), None
    if args.teacher_verdicts:
        verdicts = load_teacher_verdicts(args.teacher_verdicts)
        models = sorted({v.model for v in verdicts.values() if v.model})
        name = models[0] if len(models) == 1 else f"verdicts:{Path(args.teacher_verdicts).name}"
        pcfg = pcfg_for("verdicts")
        desc = {"kind": "verdicts", "name": name, "file": str(args.teacher_verdicts)}
        return verdicts_teacher(verdicts, name), desc, pcfg, verdict_groups(verdicts, pcfg)
    teacher = label_teacher(trajectories(as_stream(loaded)))  # a pass over the data: its labels, one byte each
    return teacher, {"kind": "labels", "name": "labels"}, pcfg_for("labels"), None


def cmd_collect(args) -> int:
    cfg = CollectConfig(**config_kwargs(args, CollectConfig))
    if args.labels:
        loaded, labels = load_labelled(args, check_images=True)  # the data's labels with --labels applied
    else:  # read as a stream: the records parsed as the teacher asks for them
        loaded, labels = stream_trajectories(args.data, **data_options(args)), None
    teacher, desc, pcfg, groups = _collect_teacher(
        args, lambda kind: teacher_pipeline(kind, args.router, args.max_images, args.teacher_max_new_tokens), loaded)
    with contextlib.closing(teacher):
        manifest = collect(args.data, args.out, teacher, pcfg, cfg, resume=args.resume, teacher_desc=desc,
                           groups=groups, progress=not args.quiet, loaded=loaded, labels=labels)
    print(json.dumps(manifest["counts"], indent=2))
    for w in manifest.get("warnings", []):
        print(f"WARNING: {w}", file=sys.stderr)
    run = manifest["this_run"]
    if run["truncated"]:
        print(f"{run['truncated']} teacher repl(ies) were cut at --teacher-max-new-tokens {args.teacher_max_new_tokens}"
              " (finish_reason 'length') before the verdict block; a thinking teacher needs room to reason: run again "
              "with --resume and a larger --teacher-max-new-tokens", file=sys.stderr)
    if run["failed"]:
        print(f"{run['failed']} trajectory(ies) failed (see {Path(args.out) / 'failures.jsonl'}); run again with "
              "--resume to retry them", file=sys.stderr)
        return 1
    return 0


def cmd_train(args) -> int:
    cfg = config_from_args(args, **({"out": "(plan only)"} if args.distill_cmd == "plan" else {}))
    if args.dry_run:  # `plan`, or `train --dry-run`
        plan = dry_run(cfg)
        print(json.dumps({k: v for k, v in plan.items() if k != "example_lengths"}, indent=2)
              if getattr(args, "json", False) else format_plan(plan))
        return 1 if plan["fits"] is False or plan["too_long"] else 0
    result = train(cfg)
    print(json.dumps(result, indent=2, default=str))
    return 0


def cmd_evaluate(args) -> int:
    from ..distill.evaluate import evaluate

    res = evaluate(args.dir, args.model, args.adapter, args.out, split=args.split, batch_size=args.max_batch_size,
                   max_new_tokens=args.verify_max_new_tokens, data=args.data, progress=not args.quiet,
                   base=not args.no_base, load_in_4bit=args.load_in_4bit)
    print(json.dumps(res["table"], indent=2))
    return 0


def cmd_merge(args) -> int:
    from ..distill.evaluate import merge

    path = merge(args.model, args.adapter, args.out)
    print(f"merged {args.adapter} into {args.model} -> {path} (load it with --model {path})")
    return 0


def add_subcommands(sub) -> None:
    d = add_command(sub, "distill", help="distil a large judge into a LoRA adapter for a small verifier",
        description="Collect a teacher's AdaptRubric judgments, train a LoRA student on them, evaluate it against the "
                    "base model, merge it.", epilog=EXAMPLES)
    dsub = d.add_subparsers(dest="distill_cmd", metavar="STEP", required=True)

    p = add_command(dsub, "collect", cmd_collect, help="run a teacher over a data set and keep what it saw and said",
        description="Run the full AdaptRubric pipeline on a teacher and write DIR/train.jsonl, val.jsonl (split by "
                    "task) and manifest.json. Unparsed teacher outputs are counted and left out; failed calls are "
                    "reported and retried by --resume.", epilog=EXAMPLES)
    add_data_argument(p)
    add_out_option(p, "distillation folder DIR")
    t = p.add_argument_group("teacher (exactly one of --teacher-model, --teacher-url, --teacher-verdicts, "
                             "--teacher-labels)")
    add_config_arguments(t, TeacherConfig)
    common(t.add_argument("--teacher-verdicts", help="verdict JSONL produced elsewhere (each line needs 'raw'; its "
                                                     "p_success, when present, is kept as the teacher's probability)"),
           "teacher")
    common(t.add_argument("--teacher-labels", action="store_true",
                          help="use the data's labels as the teacher's verdicts (with --labels: those files' labels "
                               "over the data's)"), "teacher")
    g = p.add_argument_group("what the teacher runs (default router: model for model/url teachers, rules for "
                             "labels and verdicts, which carry no router answers)")
    add_config_arguments(g, PipelineConfig, only=("router", "max_images"), defaults={"router": None})
    add_config_arguments(p.add_argument_group("collection"), CollectConfig)
    add_labels_options(p, "labels (what the review page exports; the records' labels, --agree-with-labels and "
                          "--teacher-labels read them)")
    common(p.add_argument("--resume", action="store_true", help="continue DIR: skip what is there, retry failures "
                                                                "(and truncated replies once the token cap is raised)"),
           "output")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = add_command(dsub, "train", cmd_train, help="train a LoRA/QLoRA student on DIR",
        description="LoRA (or QLoRA with --load-in-4bit) on the student with transformers' Trainer; loss on the "
                    "assistant response only, logits only where there are labels, the teacher's P(SCORE=1) learned "
                    "where it was recorded; validation agreement with the teacher each epoch, the best epoch kept. A "
                    "memory plan runs first and stops a run that would not fit (--force to override).", epilog=EXAMPLES)
    add_train_args(p)
    p.add_argument("--dry-run", action="store_true", help="print the memory plan and stop (exit 1 if it does not fit)")

    p = add_command(dsub, "plan", cmd_train, help="the memory plan of a training run, without training",
        description="Sequence lengths (text and visual, p50/p95/max) of DIR at the training settings and the "
                    "estimated peak GPU memory (weights, LoRA + optimizer, activations, loss) against the GPU present "
                    "or --gpu-memory; when it does not fit, the changes that would. Loads the processor and config "
                    "only, no weights.", epilog=EXAMPLES)
    add_train_args(p)
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(dry_run=True)

    p = add_command(dsub, "evaluate", cmd_evaluate, help="base model vs adapter on DIR's val split",
        description="Score val with the base model and with the adapter (the pipeline settings of the collection; one "
                    "loaded model, the adapter switched off for the base run), then agreement with the teacher and "
                    "accuracy/F1 against labels, side by side, with the eval harness's reports and plots.",
        epilog=EXAMPLES)
    p.add_argument("dir", help="distillation folder")
    p.add_argument("--model", required=True, help="the student's base model")
    p.add_argument("--adapter", required=True, help="adapter folder (from distill train)")
    p.add_argument("--out", required=True, help="result folder")
    p.add_argument("--split", default="val", choices=["val", "train"], help="which split (default val)")
    add_config_arguments(p, HFEngineConfig, only=("max_batch_size",))  # the same option, default and help as score's
    add_config_arguments(p, PipelineConfig, only=("verify_max_new_tokens",), defaults={"verify_max_new_tokens": None},
                         shown={"verify_max_new_tokens": "the collection's"})
    p.add_argument("--data", help="the collected data set, if it moved since `collect` (default: manifest's)")
    p.add_argument("--no-base", action="store_true", help="score the adapter only")
    p.add_argument("--load-in-4bit", action=argparse.BooleanOptionalAction, default=None,
                   help="load the base in 4-bit (nf4) or not (default: as the adapter was trained, from its "
                        "base_quantisation.json; a different choice warns)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = add_command(dsub, "merge", cmd_merge, help="merge an adapter into its base model",
        description="Write a checkpoint with the LoRA merged in; it loads with --model alone. An adapter trained on a "
                    "4-bit base (QLoRA) is merged into the base dequantised from the same 4-bit weights it learned "
                    "on, and saved unquantised.", epilog=EXAMPLES)
    p.add_argument("--model", required=True, help="base model")
    p.add_argument("--adapter", required=True, help="adapter folder")
    p.add_argument("--out", required=True, help="folder for the merged checkpoint")
