"""The `adaptrubric distill` subcommands (`collect`, `train`, `evaluate`, `merge`), registered into
the main parser by `cli.py` through `add_subcommands(sub)`. Argument handling only; the work is in
`adaptrubric_local.distill` and the top-level `training` package.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXAMPLES = """examples:
  # 1. collect a teacher's judgments (exactly one teacher)
  adaptrubric distill collect DATA --out runs/distill --teacher-url http://judge:8000/v1 \\
      --teacher-name Qwen/Qwen3-VL-235B-A22B-Instruct --concurrency 16
  adaptrubric distill collect DATA --out runs/distill --teacher-model Qwen/Qwen3-VL-32B-Instruct
  adaptrubric distill collect DATA --out runs/distill --teacher-verdicts judge_verdicts.jsonl
  adaptrubric distill collect DATA --out runs/distill --teacher-labels --balance
  adaptrubric distill collect DATA --out runs/distill --teacher-url ... --resume   # finish a run
  # 2. train a LoRA (or QLoRA) student
  adaptrubric distill train runs/distill --model Qwen/Qwen3-VL-4B-Instruct --out checkpoints/judge-4b
  adaptrubric distill train runs/distill --model Qwen/Qwen3-VL-8B-Instruct --load-in-4bit --target verdict \\
      --tasks verify,route,cue --out checkpoints/judge-8b-q
  accelerate launch --num_processes 4 -m training.train_lora runs/distill --model M --out checkpoints/x
  # 3. compare base and student on the held-out tasks, then use it
  adaptrubric distill evaluate runs/distill --model Qwen/Qwen3-VL-4B-Instruct --adapter checkpoints/judge-4b \\
      --out runs/distill-eval
  adaptrubric score DATA --model Qwen/Qwen3-VL-4B-Instruct --adapter checkpoints/judge-4b --out verdicts.jsonl
  adaptrubric distill merge --model Qwen/Qwen3-VL-4B-Instruct --adapter checkpoints/judge-4b --out merged/judge-4b
"""


def _training():
    from .distill import import_training

    return import_training()


# ----------------------------------------------------------------------------- collect
def cmd_collect(args) -> int:
    from .distill.collect import (CollectConfig, collect, label_teacher, load_teacher_verdicts, teacher_pipeline,
                                  verdict_groups)
    from .formats import load_trajectories

    chosen = [x for x in (args.teacher_model, args.teacher_url, args.teacher_verdicts) if x] + (
        ["labels"] if args.teacher_labels else [])
    if len(chosen) != 1:
        raise ValueError("give exactly one teacher: --teacher-model, --teacher-url, --teacher-verdicts or "
                         "--teacher-labels")
    cfg = CollectConfig(val_fraction=args.val_fraction, agree_with_labels=args.agree_with_labels,
                        balance=args.balance, seed=args.seed, copy_images=not args.no_copy_images)
    groups = None
    if args.teacher_url:
        from .engine.openai_engine import OpenAIEngine, OpenAIEngineConfig

        if not args.teacher_name:
            raise ValueError("--teacher-url needs --teacher-name (the served model name)")
        ecfg = OpenAIEngineConfig(base_url=args.teacher_url, model=args.teacher_name, api_key=args.api_key,
                                  timeout=args.timeout, max_retries=args.max_retries, concurrency=args.concurrency,
                                  max_new_tokens=args.max_new_tokens)
        teacher = OpenAIEngine(ecfg)
        desc = {"kind": "url", "name": args.teacher_name, "url": args.teacher_url}
        pcfg = teacher_pipeline("url", args.router, args.max_images, args.max_new_tokens)
    elif args.teacher_model:
        from .engine.hf import HFEngine, HFEngineConfig

        teacher = HFEngine(HFEngineConfig(model=args.teacher_model, max_new_tokens=args.max_new_tokens,
                                          load_in_4bit=args.load_in_4bit, max_batch_size=args.batch_size))
        desc = {"kind": "model", "name": args.teacher_model}
        pcfg = teacher_pipeline("model", args.router, args.max_images, args.max_new_tokens)
    elif args.teacher_verdicts:
        from .distill.collect import verdicts_teacher

        verdicts = load_teacher_verdicts(args.teacher_verdicts)
        models = sorted({v.model for v in verdicts.values() if v.model})
        name = models[0] if len(models) == 1 else f"verdicts:{Path(args.teacher_verdicts).name}"
        teacher = verdicts_teacher(verdicts, name)
        desc = {"kind": "verdicts", "name": name, "file": str(args.teacher_verdicts)}
        pcfg = teacher_pipeline("verdicts", args.router, args.max_images, args.max_new_tokens)
        groups = verdict_groups(verdicts, pcfg)
    else:
        teacher = label_teacher(load_trajectories(args.data, check_images=False).trajectories)
        desc = {"kind": "labels", "name": "labels"}
        pcfg = teacher_pipeline("labels", args.router, args.max_images, args.max_new_tokens)
    try:
        manifest = collect(args.data, args.out, teacher, pcfg, cfg, resume=args.resume, teacher_desc=desc,
                           groups=groups, progress=not args.quiet)
    finally:
        teacher.close()
    print(json.dumps(manifest["counts"], indent=2))
    run = manifest["this_run"]
    if run["failed"]:
        print(f"{run['failed']} trajectory(ies) failed (see {Path(args.out) / 'failures.jsonl'}); run again with "
              "--resume to retry them", file=sys.stderr)
        return 1
    return 0


# ----------------------------------------------------------------------------- train
def cmd_train(args) -> int:
    tl = _training()
    cfg = tl.config_from_args(args)
    result = tl.train(cfg)
    print(json.dumps(result, indent=2))
    return 0


# ----------------------------------------------------------------------------- evaluate / merge
def cmd_evaluate(args) -> int:
    from .distill.evaluate import evaluate

    res = evaluate(args.dir, args.model, args.adapter, args.out, split=args.split, batch_size=args.batch_size,
                   max_new_tokens=args.max_new_tokens, data=args.data, progress=not args.quiet, base=not args.no_base)
    print(json.dumps(res["table"], indent=2))
    return 0


def cmd_merge(args) -> int:
    from .distill.evaluate import merge

    path = merge(args.model, args.adapter, args.out)
    print(f"merged {args.adapter} into {args.model} -> {path} (load it with --model {path})")
    return 0


# ----------------------------------------------------------------------------- parser
def add_subcommands(sub) -> None:
    """Register `distill {collect,train,evaluate,merge}` on the main parser's subparsers."""
    fmt = argparse.RawDescriptionHelpFormatter
    d = sub.add_parser("distill", help="distil a large judge into a LoRA adapter for a small verifier",
                       description="Collect a teacher's AdaptRubric judgments, train a LoRA student on them, "
                                   "evaluate it against the base model, merge it.", epilog=EXAMPLES,
                       formatter_class=fmt)
    dsub = d.add_subparsers(dest="distill_cmd", metavar="STEP", required=True)

    p = dsub.add_parser("collect", help="run a teacher over a data set and keep what it saw and said",
                        description="Run the full AdaptRubric pipeline on a teacher and write DIR/train.jsonl, "
                                    "val.jsonl (split by task) and manifest.json. Unparsed teacher outputs are "
                                    "counted and left out; failed calls are reported and retried by --resume.",
                        epilog=EXAMPLES, formatter_class=fmt)
    p.add_argument("data", help="trajectory file or folder (any supported format)")
    p.add_argument("--out", required=True, help="distillation folder DIR")
    t = p.add_argument_group("teacher (exactly one)")
    t.add_argument("--teacher-model", help="a local Qwen3-VL checkpoint (hub id or folder) run by this package")
    t.add_argument("--teacher-url", help="OpenAI-compatible endpoint base URL, e.g. http://judge:8000/v1")
    t.add_argument("--teacher-name", help="served model name at --teacher-url")
    t.add_argument("--teacher-verdicts", help="verdict JSONL produced elsewhere (each line needs 'raw')")
    t.add_argument("--teacher-labels", action="store_true", help="use the data's labels as the teacher's verdicts")
    p.add_argument("--api-key", default="EMPTY", help="API key for --teacher-url (default EMPTY)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per HTTP attempt (default 120)")
    p.add_argument("--max-retries", type=int, default=3, help="retries per teacher call (default 3)")
    p.add_argument("--concurrency", type=int, default=8, help="teacher calls in flight (default 8)")
    p.add_argument("--max-new-tokens", type=int, default=1024, help="teacher token cap (default 1024)")
    p.add_argument("--batch-size", type=int, default=8, help="--teacher-model batch size (default 8)")
    p.add_argument("--load-in-4bit", action="store_true", help="--teacher-model in 4-bit")
    p.add_argument("--router", choices=["rules", "model"], default=None,
                   help="default: model for model/url teachers, rules for labels and verdicts")
    p.add_argument("--max-images", type=int, default=10, help="screenshot budget (default 10)")
    p.add_argument("--val-fraction", type=float, default=0.2, help="fraction of tasks held out (default 0.2)")
    p.add_argument("--agree-with-labels", action="store_true", help="keep only verdicts that match the label")
    p.add_argument("--balance", action="store_true", help="downsample the majority class in train")
    p.add_argument("--seed", type=int, default=0, help="split/balance seed (default 0)")
    p.add_argument("--no-copy-images", action="store_true", help="record screenshot paths instead of copying them")
    p.add_argument("--resume", action="store_true", help="continue DIR: skip what is there, retry failures")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_collect)

    p = dsub.add_parser("train", help="train a LoRA/QLoRA student on DIR",
                        description="LoRA (or QLoRA with --load-in-4bit) on the student with transformers' Trainer; "
                                    "loss on the assistant response only; evaluation on val each epoch.",
                        epilog=EXAMPLES, formatter_class=fmt)
    _training().add_train_args(p)
    p.set_defaults(func=cmd_train)

    p = dsub.add_parser("evaluate", help="base model vs adapter on DIR's val split",
                        description="Score val with the base model and with the adapter (the pipeline settings of "
                                    "the collection), then agreement with the teacher and accuracy/F1 against labels, "
                                    "side by side, with the eval harness's reports and plots.",
                        epilog=EXAMPLES, formatter_class=fmt)
    p.add_argument("dir", help="distillation folder")
    p.add_argument("--model", required=True, help="the student's base model")
    p.add_argument("--adapter", required=True, help="adapter folder (from distill train)")
    p.add_argument("--out", required=True, help="result folder")
    p.add_argument("--split", default="val", choices=["val", "train"], help="which split (default val)")
    p.add_argument("--batch-size", type=int, default=8, help="engine batch size (default 8)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="verifier token cap (default: the collection's, 1024 for model teachers)")
    p.add_argument("--data", help="the collected data set, if it moved since `collect` (default: manifest's)")
    p.add_argument("--no-base", action="store_true", help="score the adapter only")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_evaluate)

    p = dsub.add_parser("merge", help="merge an adapter into its base model",
                        description="Write a checkpoint with the LoRA merged in; it loads with --model alone.",
                        epilog=EXAMPLES, formatter_class=fmt)
    p.add_argument("--model", required=True, help="base model")
    p.add_argument("--adapter", required=True, help="adapter folder")
    p.add_argument("--out", required=True, help="folder for the merged checkpoint")
    p.set_defaults(func=cmd_merge)
