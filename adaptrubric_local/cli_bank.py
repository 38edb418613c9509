"""The `adaptrubric bank` subcommands (`induce`, `refine`), registered into the main parser by
`cli.py` through `add_subcommands(sub)`. Argument handling only; the work is in
`adaptrubric_local.bank_induction`.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

EXAMPLES = """examples:
  # 1. induce a bank from labelled trajectories of your own apps (a served teacher, or a local one)
  adaptrubric bank induce DATA --out my_bank.yaml --teacher-url http://judge:8000/v1 \\
      --teacher-name Qwen/Qwen3-VL-235B-A22B-Instruct --domain "our CRM web app" --name crm
  adaptrubric bank induce DATA --out my_bank.yaml --teacher-model Qwen/Qwen3-VL-32B-Instruct --families KEEP
  adaptrubric validate-bank my_bank.yaml
  # 2. refine it on a labelled DEV set with the verifier you will use for rewards
  adaptrubric bank refine --bank my_bank.yaml --data DEV --model Qwen/Qwen3-VL-8B-Instruct \\
      --teacher-url http://judge:8000/v1 --teacher-name Qwen/Qwen3-VL-235B-A22B-Instruct --out runs/refine --rounds 2
  adaptrubric bank refine ... --out runs/refine --resume        # continue after a teacher outage
  # 3. use the last round's bank
  adaptrubric score DATA --model Qwen/Qwen3-VL-8B-Instruct --bank runs/refine/round_2.yaml --out verdicts.jsonl
"""


def _teacher_options(p: argparse.ArgumentParser) -> None:
    t = p.add_argument_group("teacher (exactly one: a local model, or an OpenAI-compatible endpoint)")
    t.add_argument("--teacher-model", help="a local Qwen3-VL checkpoint (hub id or folder) run by this package")
    t.add_argument("--teacher-url", help="OpenAI-compatible endpoint base URL, e.g. http://judge:8000/v1")
    t.add_argument("--teacher-name", help="served model name at --teacher-url")
    t.add_argument("--api-key", default="EMPTY", help="API key for --teacher-url (default EMPTY)")
    t.add_argument("--timeout", type=float, default=300.0, help="seconds per HTTP attempt (default 300)")
    t.add_argument("--max-retries", type=int, default=3, help="retries per teacher call (default 3)")
    t.add_argument("--concurrency", type=int, default=8, help="teacher calls in flight (default 8)")
    t.add_argument("--teacher-max-new-tokens", type=int, default=2048,
                   help="token cap per teacher reply (default 2048)")
    t.add_argument("--induction-prompts", help="induction/refinement prompt YAML (default: the bundled "
                                                "adaptrubric_local/prompts/induction.yaml)")


def _teacher(args):
    from .bank_induction.teacher import build_teacher_engine

    return build_teacher_engine(model=args.teacher_model, url=args.teacher_url, name=args.teacher_name,
                                api_key=args.api_key, timeout=args.timeout, max_retries=args.max_retries,
                                concurrency=args.concurrency, max_new_tokens=args.teacher_max_new_tokens)


def _load(path: str, fmt: str, image_roots, check_images: bool = True):
    from .formats import load_trajectories

    loaded = load_trajectories(path, fmt=fmt, check_images=check_images, image_roots=image_roots)
    for w in loaded.warnings:
        print(f"warning: {w}", file=sys.stderr)
    for e in loaded.errors:
        print(f"skipped: {e}", file=sys.stderr)
    unlabelled = sum(t.label not in (0, 1) for t in loaded.trajectories)
    if unlabelled:
        print(f"note: {unlabelled} trajectory(ies) without a 0/1 label are not used", file=sys.stderr)
    return loaded.trajectories


def _prompts(args):
    from .bank_induction.prompts import load_induction_prompts

    return load_induction_prompts(args.induction_prompts)


# ----------------------------------------------------------------------------- induce
def cmd_induce(args) -> int:
    from .bank_induction.induce import InduceConfig, induce

    if args.families not in ("NEW", "KEEP"):
        raise ValueError("--families is NEW (propose families) or KEEP (the paper's 8, texts rewritten)")
    cfg = InduceConfig(per_family=args.per_family, max_trajectories=args.max_trajectories, per_call=args.per_call,
                       images_per_traj=args.images_per_traj, max_families=args.max_families,
                       keep_families=args.families == "KEEP", fallback=args.fallback, domain=args.domain,
                       name=args.name or Path(args.out).stem, seed=args.seed,
                       teacher_max_new_tokens=args.teacher_max_new_tokens)
    ps = _prompts(args)
    trajs = _load(args.data, args.format, args.image_root)
    teacher = _teacher(args)
    try:
        summary = induce(trajs, args.out, teacher, cfg, data_desc=str(args.data), prompts=ps, base_bank=args.base_bank)
    finally:
        teacher.close()
    print(json.dumps(summary, indent=2))
    print(f"wrote {args.out} ({len(summary['families'])} families: {', '.join(summary['families'])}); "
          f"{summary['teacher_calls']} teacher calls. Read it, then: adaptrubric validate-bank {args.out}",
          file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------- refine
def cmd_refine(args) -> int:
    from .bank_induction.refine import RefineConfig, refine
    from .cli_common import make_engine, pipeline_config

    if not args.model:
        raise ValueError("--model (the verifier the bank is refined for) is required")
    cfg = RefineConfig(rounds=args.rounds, val_fraction=args.val_fraction, max_cases=args.max_cases,
                       min_gain=args.min_gain, seed=args.seed, teacher_max_new_tokens=args.teacher_max_new_tokens)
    from .bank import DEFAULT_BANK

    bank = args.bank or str(DEFAULT_BANK)
    pcfg = pipeline_config(args, bank_path=bank)
    ps = _prompts(args)
    trajs = _load(args.data, args.format, args.image_root)
    teacher = _teacher(args)
    verifier = make_engine(args, pcfg)
    try:
        report = refine(trajs, bank, args.out, verifier, teacher, cfg, pcfg, data_desc=str(args.data),
                        prompts=ps, resume=args.resume, log=lambda s: print(s, file=sys.stderr))
    finally:
        teacher.close()
        verifier.close()
    print((Path(args.out) / "report.md").read_text())
    if report.get("status") != "done":
        print(f"adaptrubric: {report.get('status')}", file=sys.stderr)
        return 1
    return 0


# ----------------------------------------------------------------------------- parser
def add_subcommands(sub) -> None:
    """Register `bank {induce,refine}` on the main parser's subparsers."""
    from .bank_induction.induce import InduceConfig
    from .bank_induction.refine import RefineConfig
    from .cli_common import FORMATTER, add_data_options, add_model_options, add_pipeline_options

    ihelp = {f.name: f.metadata.get("help", "") for f in fields(InduceConfig)}
    rhelp = {f.name: f.metadata.get("help", "") for f in fields(RefineConfig)}
    b = sub.add_parser("bank", help="build a rubric bank for your own apps (induce, refine)",
                       description="Grow a rubric bank the way the paper built its own (§4.1, Appendix B): induce "
                                   "families and rubrics from labelled trajectories with a teacher model, then "
                                   "refine each family's rubric on the cases where the verifier disagrees with "
                                   "the label, keeping only revisions that help on held-out data.",
                       epilog=EXAMPLES, formatter_class=FORMATTER)
    bsub = b.add_subparsers(dest="bank_cmd", metavar="STEP", required=True)

    p = bsub.add_parser("induce", help="induce a bank from labelled trajectories with a teacher",
                        description="Sample labelled successes and failures per proposed family, ask the teacher "
                                    "for the verification dimensions that separate them (showing instructions, "
                                    "compiled evidence and selected screenshots), then for a grouping into "
                                    "families with description, verification steps, pitfalls and special rules. "
                                    "Writes a bank in the strict schema (the paper's meta rule and output format "
                                    "kept) with a record of teacher, data and prompts; teacher replies and "
                                    "dimensions are kept in OUT.work/. Teacher calls: ceil(sampled / --per-call) "
                                    "+ 1.", epilog=EXAMPLES, formatter_class=FORMATTER)
    p.add_argument("data", help="labelled trajectory file or folder (any supported format)")
    p.add_argument("--out", required=True, help="bank YAML to write")
    p.add_argument("--families", default="NEW", choices=["NEW", "KEEP"],
                   help="NEW: the teacher proposes families (default); KEEP: the paper's 8 families and router, "
                        "texts rewritten")
    p.add_argument("--per-family", type=int, default=15, help=ihelp["per_family"] + " (default 15)")
    p.add_argument("--max-trajectories", type=int, default=232, help=ihelp["max_trajectories"] + " (default 232)")
    p.add_argument("--per-call", type=int, default=8, help=ihelp["per_call"] + " (default 8)")
    p.add_argument("--images-per-traj", type=int, default=3, help=ihelp["images_per_traj"] + " (default 3)")
    p.add_argument("--max-families", type=int, default=8, help=ihelp["max_families"] + " (default 8)")
    p.add_argument("--fallback", default="general", help=ihelp["fallback"] + " (default general)")
    p.add_argument("--domain", default="GUI apps", help=ihelp["domain"])
    p.add_argument("--name", help="the bank's name (default: the --out file name)")
    p.add_argument("--base-bank", help="bank whose meta rule, output format and (with KEEP) families are kept "
                                       "(default: the bundled paper bank)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    add_data_options(p)
    _teacher_options(p)
    p.set_defaults(func=cmd_induce)

    p = bsub.add_parser("refine", help="revise family rubrics from disagreement cases, validated on held-out data",
                        description="Split DEV by task into a refine part and a validation part the teacher never "
                                    "sees. Each round: score both with the bank on --model; for each family with "
                                    "disagreements on the refine part, the teacher revises its verification steps, "
                                    "pitfalls and special rules; a revision is kept only if validation accuracy "
                                    "rises. Writes OUT/round_K.yaml, OUT/round_K.diff.md, OUT/report.{json,md} and "
                                    "OUT/teacher.jsonl as it goes. Cost per round: one verifier call per DEV "
                                    "trajectory (routes and cues once per run), one teacher call per family with "
                                    "disagreements, and one verifier call per validation trajectory of each "
                                    "revised family.", epilog=EXAMPLES, formatter_class=FORMATTER)
    p.add_argument("--data", required=True, help="labelled DEV trajectories (any supported format)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--rounds", type=int, default=2, help=rhelp["rounds"] + " (default 2)")
    p.add_argument("--val-fraction", type=float, default=0.5, help=rhelp["val_fraction"] + " (default 0.5)")
    p.add_argument("--max-cases", type=int, default=8, help=rhelp["max_cases"] + " (default 8)")
    p.add_argument("--min-gain", type=float, default=0.0, help=rhelp["min_gain"] + " (default 0)")
    p.add_argument("--seed", type=int, default=0, help=rhelp["seed"] + " (default 0)")
    p.add_argument("--resume", action="store_true", help="continue from the last round_K.yaml in OUT")
    add_data_options(p)
    add_pipeline_options(p)  # --bank: the bank to refine (default: the bundled paper bank)
    add_model_options(p)
    _teacher_options(p)
    p.set_defaults(func=cmd_refine)
