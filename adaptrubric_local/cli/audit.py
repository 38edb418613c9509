"""The `audit` subcommand, registered by `cli/`: argument handling only; the counterfactuals, the
scoring and the report are in `audit/`.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from ..formats.stream import stream_trajectories
from ..pipeline import AdaptRubric
from .common import add_command, add_scoring_options, engine_from_options, engine_options, pipeline_config

EXAMPLES = """examples:
  adaptrubric audit DATA --model Qwen/Qwen3-VL-8B-Instruct --out runs/audit-8b
  adaptrubric audit DATA --model Qwen/Qwen3-VL-4B-Instruct --adapter checkpoints/student --out runs/audit-student \\
      --compare runs/audit-8b                      # the student beside its teacher
  adaptrubric audit DATA --model M --perturb claim-success injected-verdict --out runs/audit-quick
  adaptrubric audit DATA --openai-url http://HOST:8000/v1 --model NAME --out runs/audit-remote
  adaptrubric audit DATA --model M --out runs/audit-8b --resume        # after a crash: nothing lost or repeated
  adaptrubric audit DATA --out runs/cf --dry-run       # write the counterfactuals and the cost; no model
  adaptrubric audit --out runs/audit-student --compare runs/audit-8b   # two finished audits side by side
  adaptrubric audit DATA --model M --out runs/a --plugins my_perturbations.py --perturb my-change
  adaptrubric audit --list-perturbations

Each perturbation changes a copy of every trajectory it applies to (ids ID~NAME); the originals and the
copies are scored as `score` scores (the same flags, batching and --resume). OUT gets report.md, audit.json,
flips.png, review.html (each original beside its counterfactuals), counterfactuals.jsonl (canonical data,
screenshots referenced, not copied: score it with any engine, --image-root the data folder) and the verdicts.
The report and the summary printed open with the verdict: the originals' agreement with their labels, each
perturbation robust / not robust / too few to tell (by the 95% interval of each clause it states) and a
bottom line (not fit as an RL reward yet / too few to tell yet / robust / cannot tell yet).
"""


def summary_lines(audit: dict) -> list[str]:
    """The accuracy, one line per perturbation (its verdict first) and the bottom line, as printed."""
    from ..audit.report import pct
    from ..audit.verdict import accuracy_text

    lines = [accuracy_text(audit["verdict"]["accuracy"])]
    for name, r in audit["perturbations"].items():
        dp = "-" if r["mean_dp_success"] is None else f"{r['mean_dp_success']:+.3f}"
        lines.append(f"{name:<20} {r['verdict'].upper():<15}  applied {r['applied']:>4}  0->1 {pct(r['flips_0_1'])}  "
                     f"1->0 {pct(r['flips_1_0'])}  mean dp_success {dp}  newly unparsed {len(r['newly_unparsed'])}  "
                     f"EVIDENCE_SUFFICIENT: no {r['insufficient']['before']} -> {r['insufficient']['after']}")
    return [*lines, f"bottom line: {audit['verdict']['bottom_line']}"]


def cmd_audit(args) -> int:
    from ..audit import REGISTRY, get
    from ..audit.report import write_compare
    from ..audit.run import cost_text, plan_of, run_audit

    if args.list_perturbations:  # name, what it changes, what a robust verifier does, the label
        print("\n".join([f"{'name':<22} {'label':<9} change -> a robust verifier",
                         *(f"{p.name:<22} {p.label!s:<9} {p.change} -> {p.robust}" for p in REGISTRY.values())]))
        return 0
    if not args.out:
        raise ValueError("give --out DIR (the audit's folder)")
    if args.data is None:
        if not args.compare:
            raise ValueError("give DATA and --model to audit a verifier, or --compare RUN_B to put the audit in "
                             "--out beside another")
        print(write_compare(args.out, args.out, args.compare))
        print(f"wrote {args.out}/compare.md, compare.png")
        return 0
    from ..audit.streamed import write_streamed

    chosen = get(args.perturb)
    cfg = pipeline_config(args)
    loaded = stream_trajectories(args.data, fmt=args.format, image_roots=args.image_root)  # read as a stream
    if args.dry_run:
        for w in loaded.warnings:
            print(f"warning: {w}", file=sys.stderr)
        files, cost, _ = write_streamed(Path(args.out), chosen, loaded, cfg.max_images)
        print(cost_text(plan_of(cost, chosen, cfg)))
        print(f"wrote {', '.join(sorted({str(f) for f in files.values()}))} (no model loaded: --dry-run)")
        return 0
    options = engine_options(args, cfg)
    with contextlib.closing(engine_from_options(options)) as engine:
        audit = run_audit(AdaptRubric(engine, cfg), args.data, args.out, chosen, loaded=loaded, resume=args.resume,
                          progress=not args.quiet, image_roots=args.image_root, engine_options=options,
                          build_engine=engine_from_options, force_settings=args.force_settings,
                          log=lambda s: print(s, flush=True))
    o = audit["originals"]
    print(f"originals: {o['n']} ({o['ones']} SCORE 1, {o['zeros']} SCORE 0, {o['unparsed']} unparsed, {o['errors']} "
          "errors)")
    print("\n".join(summary_lines(audit)))
    if args.compare:
        print(write_compare(args.out, args.out, args.compare))
    print(f"wrote {args.out}/report.md, audit.json, flips.png, review.html, counterfactuals.jsonl, verdicts.jsonl"
          + (", compare.md, compare.png" if args.compare else ""))
    return 0


def add_subcommands(sub) -> None:
    p = add_command(sub, "audit", cmd_audit,
        help="counterfactual trajectories: how often each change moves the verifier's verdict",
        description="Score every trajectory of a labelled DATA set and counterfactual copies of it (the answer "
                    "claiming success, verdict lines injected, the final frame dropped or replaced, the frames "
                    "reversed, another task's instruction, half the visual budget), and report per change how many "
                    "verdicts moved 0 -> 1 and 1 -> 0 (95% intervals), the mean change of p_success and the verdicts "
                    "that became unparsed.", epilog=EXAMPLES)
    p.add_argument("data", nargs="?", help="labelled trajectories (any supported format)")
    p.add_argument("--out", help="the audit's folder")
    p.add_argument("--perturb", nargs="+", action="extend", metavar="NAME",
                   help="the perturbations to apply (repeatable; default: every registered one; see "
                        "--list-perturbations)")
    p.add_argument("--list-perturbations", action="store_true", help="print the registered perturbations and exit")
    p.add_argument("--compare", metavar="RUN_B",
                   help="an earlier audit's folder: write OUT/compare.md and compare.png with both side by side "
                        "(without DATA: compare the audit already in --out)")
    p.add_argument("--dry-run", action="store_true",
                   help="write the counterfactual data and print what scoring it costs; load no model")
    p.add_argument("--resume", action="store_true",
                   help="continue the audit in --out: score only what its verdict files lack (same settings)")
    p.add_argument("--force-settings", action="store_true",
                   help="with --resume, continue even if the settings differ from the files' (recorded)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_scoring_options(p)
