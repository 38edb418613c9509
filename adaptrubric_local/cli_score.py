"""Subcommands that run models or make data (`score`, `synth`, `make-tiny-model`, `demo`),
registered into the main parser by `cli.py`. Argument handling and file I/O only; the work is done
by the pipeline and the engines.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def pipeline_config(args, **overrides):
    """The PipelineConfig that the scoring options of `score`, `eval`, `tts` and `ablate` describe."""
    from .pipeline import PipelineConfig

    kw = dict(router=args.router, max_images=args.max_images, batch_size=max(4 * args.batch_size, 8),
              bank_path=args.bank, verify_max_new_tokens=args.max_new_tokens)
    return PipelineConfig(**{**kw, **overrides})


def score_with_model(args, out, cfg, resume: bool = False, fmt: str = "auto") -> dict:
    """Load args.data (failing before the model loads), build the engine, score into `out`."""
    from .cli import _make_engine
    from .formats import load_trajectories
    from .pipeline import AdaptRubric
    from .scoring import score_file

    loaded = load_trajectories(args.data, fmt=fmt)
    engine = _make_engine(args)
    try:
        return score_file(AdaptRubric(engine, cfg), args.data, out, resume=resume, fmt=fmt,
                          progress=not args.quiet, loaded=loaded)
    finally:
        engine.close()


def cmd_score(args) -> int:
    cfg = pipeline_config(args, coarse=not args.no_coarse, fine=not args.no_fine)
    summary = score_with_model(args, args.out, cfg, resume=args.resume, fmt=args.format)
    print(json.dumps(summary, indent=2))
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


# ----------------------------------------------------------------------------- synth / tiny / demo
def cmd_synth(args) -> int:
    from .synth import synthesize

    w, h = (int(x) for x in args.size.lower().split("x"))
    path = synthesize(Path(args.out), n_tasks=args.tasks, candidates=args.candidates, size=(w, h), seed=args.seed)
    print(f"wrote {args.tasks * args.candidates} trajectories ({args.tasks} tasks x {args.candidates} candidates) "
          f"-> {path}")
    return 0


def cmd_make_tiny(args) -> int:
    from .engine.tiny import make_tiny_model

    path = make_tiny_model(args.dir, seed=args.seed)
    print(f"tiny random-weight Qwen3-VL saved to {path} (outputs are noise; for tests and smoke runs)")
    return 0


def cmd_demo(args) -> int:
    from .engine.tiny import make_tiny_model
    from .synth import synthesize

    out = Path(args.out)
    print("== SMOKE RUN: a tiny Qwen3-VL with RANDOM weights; its verdicts are noise. ==")
    print("   It exercises the real path: from_pretrained, image pipeline, batched generation, parsing.\n")
    model = out / "tiny-qwen3-vl"
    if not (model / "config.json").is_file():
        make_tiny_model(model)
    data = synthesize(out / "synth", n_tasks=8, candidates=3, size=(360, 800))
    verdict_file = out / "verdicts.jsonl"
    if verdict_file.exists():
        verdict_file.unlink()
    ns = argparse.Namespace(data=str(data), format="auto", out=str(verdict_file), resume=False, router="rules",
                            no_coarse=False, no_fine=False, max_images=10, batch_size=8, bank=None,
                            max_new_tokens=32, model=str(model), adapter=None, load_in_4bit=False, dtype="auto",
                            device_map="auto", votes=1, max_visual_tokens=6144, summary_json=str(out / "summary.json"),
                            quiet=True)
    cmd_score(ns)
    rows = [json.loads(x) for x in verdict_file.read_text().splitlines()]
    print(f"\n{'id':<10}{'family':<20}{'label':>6}{'score':>7}{'p_success':>11}  {'status':<9}{'images':>7}")
    for r in rows:
        p = "-" if r["p_success"] is None else f"{r['p_success']:.2f}"
        print(f"{r['id']:<10}{r['category'] or '-':<20}{r['label']!s:>6}{r['score']!s:>7}{p:>11}  "
              f"{r['status']:<9}{r['n_images']:>7}")
    print(f"\nverdicts: {verdict_file}\nsummary:  {out / 'summary.json'}")
    print("\nFor real scoring, the same command with a real checkpoint:\n"
          f"  adaptrubric score {data} --model Qwen/Qwen3-VL-8B-Instruct --out verdicts.jsonl")
    return 0


# ----------------------------------------------------------------------------- registration
def add_subcommands(sub, add_model_args, examples: str) -> None:
    """Register the scoring-related subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("score", help="score trajectories with Qwen3-VL, writing one verdict line each",
                       description="Score every trajectory in DATA and stream verdict lines to --out as they "
                                   "complete. A bad record becomes a line with status=error; an output that "
                                   "does not parse becomes status=unparsed (score null).",
                       epilog=examples, formatter_class=fmt)
    p.add_argument("data", help="trajectory file or folder (any supported format)")
    p.add_argument("--out", required=True, help="verdict JSONL to write")
    p.add_argument("--format", default="auto", help="input format (default auto)")
    p.add_argument("--batch-size", type=int, default=8, help="trajectories per GPU batch (default 8)")
    p.add_argument("--max-images", type=int, default=10, help="screenshot budget per trajectory (default 10)")
    p.add_argument("--max-visual-tokens", type=int, default=6144,
                   help="visual-token budget per trajectory (default 6144; 0 for none)")
    p.add_argument("--max-new-tokens", type=int, default=256, help="cap on verifier output tokens (default 256)")
    p.add_argument("--router", choices=["rules", "model"], default="rules", help="task router (default rules)")
    p.add_argument("--no-coarse", action="store_true", help="ablation: no family rubric")
    p.add_argument("--no-fine", action="store_true", help="ablation: no fine cues")
    p.add_argument("--bank", help="rubric bank YAML (default: bundled)")
    p.add_argument("--resume", action="store_true", help="skip ids already in --out and append the rest")
    p.add_argument("--summary-json", help="also write the run summary here")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_model_args(p, required=True)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("synth", help="write labelled synthetic trajectories for every task family",
                       formatter_class=fmt, epilog="example:\n  adaptrubric synth --out runs/synth --tasks 16")
    p.add_argument("--out", required=True, help="output folder (trajectories.jsonl + screens/)")
    p.add_argument("--tasks", type=int, default=16, help="distinct tasks (cycling through the 8 families)")
    p.add_argument("--candidates", type=int, default=4, help="candidates per task (same task_id)")
    p.add_argument("--size", default="360x800", help="screen size WxH (default 360x800)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("make-tiny-model", help="build a tiny random Qwen3-VL offline and save it",
                       formatter_class=fmt, epilog="example:\n  adaptrubric make-tiny-model runs/tiny")
    p.add_argument("dir", help="output folder")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_make_tiny)

    p = sub.add_parser("demo", help="smoke run: tiny random model + synthetic data, scored end to end",
                       formatter_class=fmt, epilog="example:\n  adaptrubric demo --out runs/demo")
    p.add_argument("--out", default="runs/demo", help="working folder (default runs/demo)")
    p.set_defaults(func=cmd_demo)
