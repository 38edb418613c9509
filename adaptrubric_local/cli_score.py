"""Subcommands that run models or make data (`score`, `synth`, `make-tiny-model`, `demo`),
registered into the main parser by `cli.py`. Argument handling and file I/O only; the work is done
by the pipeline, the engines and `scoring`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .cli_common import FORMATTER, add_scoring_options, engine_options, pipeline_config, score_with_model

EXAMPLES = """examples:
  adaptrubric score DATA --model Qwen/Qwen3-VL-8B-Instruct --out verdicts.jsonl
  adaptrubric score DATA --model Qwen/Qwen3-VL-8B-Instruct --out verdicts.jsonl --resume
  adaptrubric score DATA --model Qwen/Qwen3-VL-4B-Instruct --adapter checkpoints/my-student --out v.jsonl
  adaptrubric score DATA --model M --out v.jsonl --max-visual-tokens 6144 --dedupe-frames   # faster, not faithful
  adaptrubric score DATA --model M --out v.jsonl --router rules --no-fine                 # verifier calls only
  adaptrubric score /data/records.jsonl --image-root /mnt/screenshots --model M --out v.jsonl
  adaptrubric score DATA --model Qwen/Qwen3-VL-8B-Instruct --out verdicts.jsonl --workers 4   # 4 GPUs
  adaptrubric score DATA --model M --out v.jsonl --calibration calib.json     # + p_success_calibrated

Defaults are the paper's method: the model router, fine cues, up to 10 screenshots at the processor's
own resolution, up to 1024 verifier tokens (stopping once the verdict block is complete).
"""


def cmd_score(args) -> int:
    cfg = pipeline_config(args)
    if args.workers > 1:
        summary = score_with_workers(args, cfg)
    else:
        summary = score_with_model(args, args.out, cfg, resume=args.resume, retry_errors=args.retry_errors,
                                   force_settings=args.force_settings, calibration=args.calibration)
    print(json.dumps(summary, indent=2))
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(summary, indent=2) + "\n")
    if summary.get("hit_cap"):
        print(f"note: {summary['hit_cap']} output(s) hit the --max-new-tokens cap ({cfg.verify_max_new_tokens}); "
              "cut-off outputs are usually unparsed: raise the cap", file=sys.stderr)
    return 0


def score_with_workers(args, cfg) -> dict:
    """`score --workers N`: one process (and model copy) per worker, shards merged into --out."""
    from dataclasses import asdict

    from .distributed import score_distributed
    from .scoring import check_resume

    if args.image_root:
        raise ValueError("--image-root is not supported with --workers > 1 yet; use one worker")
    options = engine_options(args, cfg)
    cal = {}
    if args.calibration:  # fail before any model loads
        from .evaluation.calibration import load, provenance

        cal = provenance(load(args.calibration)[1])
    if args.resume:  # the same guard as a one-process run: one configuration per verdict file
        meta = {**asdict(cfg), "engine": options, "workers": args.workers, "data": str(args.data), **cal}
        check_resume(Path(args.out), meta, args.force_settings)
    summary = score_distributed(args.data, args.out, workers=args.workers, pipeline=cfg, engine_options=options,
                                resume=args.resume, fmt=args.format, progress=not args.quiet)
    if args.calibration:  # the merged file gets its calibrated probabilities in one pass
        from .evaluation.calibration import apply_file

        apply_file(args.out, args.out, args.calibration)
    return summary


# ----------------------------------------------------------------------------- synth / tiny / demo
def cmd_synth(args) -> int:
    from .synth import synthesize

    w, h = (int(x) for x in args.size.lower().split("x"))
    path = synthesize(Path(args.out), n_tasks=args.tasks, candidates=args.candidates, size=(w, h), seed=args.seed)
    print(f"wrote {args.tasks * args.candidates} trajectories ({args.tasks} tasks x {args.candidates} candidates) "
          f"-> {path}")
    return 0


def cmd_make_tiny(args) -> int:
    from .dry_run import tokenizer_corpus
    from .engine.tiny import make_tiny_model

    path = make_tiny_model(args.dir, corpus=tokenizer_corpus(), seed=args.seed)
    print(f"tiny random-weight Qwen3-VL saved to {path} (outputs are noise; for tests and smoke runs)")
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(Path(args.out))


# ----------------------------------------------------------------------------- registration
def add_score_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of `score`."""
    p.add_argument("data", help="trajectory file or folder (any supported format)")
    p.add_argument("--out", required=True, help="verdict JSONL to write")
    p.add_argument("--resume", action="store_true",
                   help="continue --out: skip ids already scored (the settings must match the file's)")
    p.add_argument("--retry-errors", action=argparse.BooleanOptionalAction, default=True,
                   help="with --resume, score again the ids whose last line is an error (default on)")
    p.add_argument("--force-settings", action="store_true",
                   help="with --resume, continue even if the settings differ from the file's (recorded in the "
                        "config sidecar)")
    p.add_argument("--workers", type=int, default=1,
                   help="worker processes, one model copy each (one GPU each when there are enough); a killed "
                        "worker is restarted; with --resume a killed run continues (default 1)")
    p.add_argument("--calibration", metavar="CALIB.json",
                   help="a file from `adaptrubric calibrate`: each line also gets p_success_calibrated, and the "
                        "file's sha256 is recorded in OUT.config.json")
    p.add_argument("--summary-json", help="also write the run summary here")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_scoring_options(p)


def add_subcommands(sub) -> None:
    """Register the scoring-related subcommands."""
    p = sub.add_parser("score", help="score trajectories with Qwen3-VL, writing one verdict line each",
                       description="Score every trajectory in DATA and stream verdict lines to --out as they "
                                   "complete. A bad record becomes a line with status=error (its id kept); an "
                                   "output that does not parse becomes status=unparsed (score null). Writes "
                                   "OUT.config.json (settings) and OUT.summary.json beside it.",
                       epilog=EXAMPLES, formatter_class=FORMATTER)
    add_score_arguments(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("synth", help="write labelled synthetic trajectories for every task family",
                       formatter_class=FORMATTER, epilog="example:\n  adaptrubric synth --out runs/synth --tasks 16")
    p.add_argument("--out", required=True, help="output folder (trajectories.jsonl + screens/)")
    p.add_argument("--tasks", type=int, default=16, help="distinct tasks (cycling through the 8 families)")
    p.add_argument("--candidates", type=int, default=4, help="candidates per task (same task_id)")
    p.add_argument("--size", default="360x800", help="screen size WxH (default 360x800)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("make-tiny-model", help="build a tiny random Qwen3-VL offline and save it",
                       formatter_class=FORMATTER, epilog="example:\n  adaptrubric make-tiny-model runs/tiny")
    p.add_argument("dir", help="output folder")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_make_tiny)

    p = sub.add_parser("demo", help="the product end to end on generated data, on the CPU",
                       formatter_class=FORMATTER, epilog="example:\n  adaptrubric demo --out runs/demo")
    p.add_argument("--out", default="runs/demo", help="working folder (default runs/demo)")
    p.set_defaults(func=cmd_demo)
