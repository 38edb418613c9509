"""The `adaptrubric bank` subcommands (`induce`, `refine`, `validate`), registered into the main parser by
`cli/` through `add_subcommands(sub)`. Argument handling only; the work is in
`adaptrubric_local.bank_induction`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from ..bank import DEFAULT_BANK, load_bank
from ..bank_induction.induce import InduceConfig, induce
from ..bank_induction.refine import RefineConfig, refine
from ..engine.teacher import TeacherConfig
from ..flags import add_config_arguments, common, config_kwargs
from ..schema import SchemaError

EXAMPLES = """examples:
  # 1. induce a bank from labelled trajectories of your own apps (a served teacher, or a local one)
  adaptrubric bank induce DATA --out my_bank.yaml --teacher-url http://judge:8000/v1 \\
      --teacher-name Qwen/Qwen3-VL-235B-A22B-Instruct --domain "our CRM web app" --name crm
  adaptrubric bank induce DATA --out my_bank.yaml --teacher-model Qwen/Qwen3-VL-32B-Instruct --keep-families
  adaptrubric bank validate my_bank.yaml
  # 2. refine it on a labelled DEV set with the verifier you will use for rewards
  adaptrubric bank refine DEV --bank-path my_bank.yaml --model Qwen/Qwen3-VL-8B-Instruct \\
      --teacher-url http://judge:8000/v1 --teacher-name Qwen/Qwen3-VL-235B-A22B-Instruct --out runs/refine --rounds 2
  adaptrubric bank refine ... --out runs/refine --resume        # continue after a teacher outage
  # 3. use the last round's bank
  adaptrubric score DATA --model Qwen/Qwen3-VL-8B-Instruct --bank-path runs/refine/round_2.yaml --out verdicts.jsonl
"""


def _teacher_options(p: argparse.ArgumentParser) -> None:
    t = p.add_argument_group("teacher (exactly one: a local model, or an OpenAI-compatible endpoint)")
    add_config_arguments(t, TeacherConfig)
    t.add_argument("--induction-prompts", help="induction/refinement prompt YAML (default: the bundled "
                                                "adaptrubric_local/prompts/induction.yaml)")


def _inputs(args) -> tuple:
    """(the --induction-prompts, DATA's trajectories, the teacher): what `induce` and `refine` read."""
    from ..bank_induction.prompts import load_induction_prompts
    from ..formats import load_trajectories

    prompts = load_induction_prompts(args.induction_prompts)
    loaded = load_trajectories(args.data, fmt=args.format, check_images=True, image_roots=args.image_root)
    for w in loaded.warnings:
        print(f"warning: {w}", file=sys.stderr)
    for e in loaded.errors:
        print(f"skipped: {e}", file=sys.stderr)
    unlabelled = sum(t.label not in (0, 1) for t in loaded.trajectories)
    if unlabelled:
        print(f"note: {unlabelled} trajectory(ies) without a 0/1 label are not used", file=sys.stderr)
    return prompts, loaded.trajectories, TeacherConfig(**config_kwargs(args, TeacherConfig)).build()


def cmd_induce(args) -> int:
    kw = config_kwargs(args, InduceConfig)
    cfg = InduceConfig(**{**kw, "name": kw.get("name") or Path(args.out).stem})
    ps, trajs, teacher = _inputs(args)
    with contextlib.closing(teacher):
        summary = induce(trajs, args.out, teacher, cfg, data_desc=str(args.data), prompts=ps, base_bank=args.base_bank)
    print(json.dumps(summary, indent=2))
    print(f"wrote {args.out} ({len(summary['families'])} families: {', '.join(summary['families'])}); "
          f"{summary['teacher_calls']} teacher calls. Read it, then: adaptrubric bank validate {args.out}",
          file=sys.stderr)
    return 0


def cmd_refine(args) -> int:
    from .common import make_engine, pipeline_config

    if not args.model:
        raise ValueError("--model (the verifier the bank is refined for) is required")
    cfg = RefineConfig(**config_kwargs(args, RefineConfig))
    bank = args.bank_path or str(DEFAULT_BANK)
    pcfg = pipeline_config(args, bank_path=bank)
    ps, trajs, teacher = _inputs(args)
    verifier = make_engine(args, pcfg)
    with contextlib.closing(verifier), contextlib.closing(teacher):  # (the teacher closed first)
        report = refine(trajs, bank, args.out, verifier, teacher, cfg, pcfg, data_desc=str(args.data),
                        prompts=ps, resume=args.resume, log=lambda s: print(s, file=sys.stderr))
    print((Path(args.out) / "report.md").read_text())
    if report.get("status") != "done":
        print(f"adaptrubric: {report.get('status')}", file=sys.stderr)
        return 1
    return 0


def add_subcommands(sub) -> None:
    from .common import add_command, add_data_argument, add_data_options, add_out_option, add_scoring_options

    b = add_command(sub, "bank", help="build and check a rubric bank for your own apps (induce, refine, validate)",
        description="Grow a rubric bank the way the paper built its own (§4.1, Appendix B): induce families and "
                    "rubrics from labelled trajectories with a teacher model, then refine each family's rubric on the "
                    "cases where the verifier disagrees with the label, keeping only revisions that help on held-out "
                    "data.", epilog=EXAMPLES)
    bsub = b.add_subparsers(dest="bank_cmd", metavar="STEP", required=True)

    p = add_command(bsub, "induce", cmd_induce, help="induce a bank from labelled trajectories with a teacher",
        description="Sample labelled successes and failures per proposed family, ask the teacher for the verification "
                    "dimensions that separate them (showing instructions, compiled evidence and selected "
                    "screenshots), then for a grouping into families with description, verification steps, pitfalls "
                    "and special rules. Writes a bank in the strict schema (the paper's meta rule and output format "
                    "kept) with a record of teacher, data and prompts; teacher replies and dimensions are kept in "
                    "OUT.work/. Teacher calls: ceil(sampled / --per-call) + 1.", epilog=EXAMPLES)
    add_data_argument(p, "labelled trajectory file or folder (any supported format)")
    add_out_option(p, "bank YAML to write")
    add_config_arguments(p.add_argument_group("induction"), InduceConfig, skip=("teacher_max_new_tokens",),
                         defaults={"name": None})
    p.add_argument("--base-bank", help="bank whose meta rule, output format and (with --keep-families) families are "
                                       "kept (default: the bundled paper bank)")
    add_data_options(p)
    _teacher_options(p)

    p = add_command(bsub, "refine", cmd_refine,
        help="revise family rubrics from disagreement cases, validated on held-out data",
        description="Split DEV by task into a refine part and a validation part the teacher never sees. Each round: "
                    "score both with the bank on --model; for each family with disagreements on the refine part, the "
                    "teacher revises its verification steps, pitfalls and special rules; a revision is kept only if "
                    "validation accuracy rises. Writes OUT/round_K.yaml, OUT/round_K.diff.md, OUT/report.{json,md} "
                    "and OUT/teacher.jsonl as it goes. Cost per round: one verifier call per DEV trajectory (routes "
                    "and cues once per run), one teacher call per family with disagreements, and one verifier call "
                    "per validation trajectory of each revised family.", epilog=EXAMPLES)
    add_data_argument(p, "labelled DEV trajectories (any supported format)")
    add_out_option(p, "output folder")
    add_config_arguments(p.add_argument_group("refinement"), RefineConfig, skip=("teacher_max_new_tokens",))
    common(p.add_argument("--resume", action="store_true", help="continue from the last round_K.yaml in OUT"), "output")
    add_scoring_options(p)  # --bank-path: the bank to refine (default: the bundled paper bank)
    _teacher_options(p)

    p = add_command(bsub, "validate", cmd_validate, help="check a rubric bank YAML against the schema",
        description="Load a rubric bank into the strict schema and print its hash, or every problem with file and "
                    "field.", epilog=VALIDATE_EXAMPLES)
    p.add_argument("path", help="bank YAML file")


VALIDATE_EXAMPLES = """examples:
  adaptrubric bank validate rubric_bank/default.yaml
  adaptrubric bank validate my_bank.yaml && adaptrubric score DATA --model M --bank-path my_bank.yaml --out v.jsonl

A valid bank has its families (the paper's eight, or your own with `taxonomy: custom` and one fallback
family), each with a description, verification steps, common pitfalls, special rules, an output format
and rubric items, plus the shared meta rule; unknown keys are errors naming the file and field.
"""


def cmd_validate(args) -> int:
    try:
        bank = load_bank(args.path)
    except SchemaError as exc:
        print(exc, file=sys.stderr)
        return 1
    n_items = sum(len(rs.rubric_items) for rs in bank.families.values())
    print(f"{args.path}: OK ({len(bank.families)} families, {n_items} rubric items, sha {bank.sha})")
    return 0
