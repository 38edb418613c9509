"""The `review` and `calibrate` subcommands, registered by `cli/`. Argument handling only; the
work is in `evaluation.harness` (the review page) and `evaluation.calibration`.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..evaluation import calibration
from ..evaluation.review_order import ReviewOrderConfig
from ..evaluation.verdict_table import read
from ..flags import add_config_arguments, config_kwargs
from ..scoring import calibrate_file
from .common import (
    add_command,
    add_coverage_options,
    add_data_argument,
    add_data_options,
    load_labelled,
    print_coverage,
)

REVIEW_EXAMPLES = """examples:
  adaptrubric review runs/synth/trajectories.jsonl --verdicts runs/verdicts.jsonl --out runs/review
  adaptrubric review ../data/androidgen --verdicts verdicts.jsonl --out runs/review && \\
      chromium runs/review/review.html
  # a labelling batch: the 50 verdicts nearest p_success 0.5 that have no label yet
  adaptrubric review DATA --verdicts v.jsonl --order uncertain --budget 50 --out runs/label-1
  # the next batch, after exporting labels.jsonl from the first page
  adaptrubric review DATA --verdicts v.jsonl --labels labels.jsonl --order uncertain --budget 50 \\
      --out runs/label-2
  # where a student and its teacher disagree
  adaptrubric review DATA --verdicts student.jsonl --compare teacher.jsonl --order disagree --out runs/disagree

The page works offline (no server, nothing from the network): open review.html in a browser. Filter by
outcome (false positives first), family, platform, status and your labels; sort by p_success or by how
confident a wrong verdict was; search ids and instructions; j / k move between cards; 1 / 0 / u label
the current card success / failure / unsure, e writes a note, o opens its screenshots (left / right
between frames, z actual size). Labels stay in the browser; Export writes labels.jsonl for --labels.
Each card's "link" is a shareable review.html#id=... address. Thumbnails live in review_files/.
Which order for what (README, "Labelling"): random for labels to calibrate or evaluate on;
uncertain and disagree to find the verifier's mistakes.
"""

CALIBRATE_EXAMPLES = """examples:
  # fit on labelled dev verdicts, then score new data with calibrated probabilities
  adaptrubric calibrate DEV --verdicts dev_verdicts.jsonl --out calib.json
  adaptrubric score DATA --model M --out verdicts.jsonl --calibration calib.json
  # add calibrated probabilities to verdicts already scored (no model needed), then evaluate them
  adaptrubric calibrate --apply calib.json --verdicts test_verdicts.jsonl --out test_calibrated.jsonl
  adaptrubric eval TEST --verdicts test_calibrated.jsonl --out runs/eval-calibrated

Temperature scaling (default) divides logit(p_success) by one fitted number T; --method platt also fits
an offset. Both keep the order of the probabilities (AUROC and best-of-N picks do not change); they fix
what the numbers mean (Brier, ECE, the size of a soft reward). Fit on 50-200 labelled verdicts (more for
--method platt) from the same verifier and data distribution you will score (docs/benchmarks.md has what
each size buys).
On verdicts whose p_success says little about the labels the fit flattens it (T at its bound 1000, or
calibrated probabilities with a standard deviation below 0.05): calibrate warns, since a p_success reward
would then be constant, and --require-signal makes that an error.
"""


def cmd_review(args) -> int:
    from ..evaluation.harness import run_review
    from ..evaluation.review_page import folder_bytes

    order = ReviewOrderConfig(**config_kwargs(args, ReviewOrderConfig))
    loaded, labels = load_labelled(args)
    res = run_review(args.verdicts, args.out, args.data, loaded, progress=not args.quiet, order=order, labels=labels,
                     subset=args.subset, allow_extra=args.allow_extra)
    print_coverage({"coverage": res["coverage"], "run": {"data": str(args.data), "verdicts": str(args.verdicts)}})
    print(review_counts_line(res))
    if res["order"]:
        o = res["order"]
        print(f"cards in {o['order']} order" + (f" against {o['compare']}" if o["compare"] else "")
              + f": {o['shown']} of {o['of']} written" + (f" (--budget {o['budget']})" if o["budget"] else ""))
    print(f"wrote {res['page']} ({folder_bytes(args.out) / 1e6:.1f} MB with review_files/); open it in a browser")
    return 0


def review_counts_line(res: dict) -> str:
    """The page's own counts (its filter chips), then eval's headline's (unanswered verdicts: failures)."""
    k, c = res["counts"], res["confusion"]
    chips = " ".join(f"{o}={k[o]}" for o in ("TP", "FP", "FN", "TN", "unparsed", "error", "missing", "unlabelled")
                     if k[o] or o not in ("missing", "unlabelled"))
    of = f" (of {res['of']} verdicts)" if res["n"] != res["of"] else ""
    return (f"{res['n']} cards{of}: {chips} (TP/FP/FN/TN: parsed, labelled verdicts; the page's counts)\n"
            f"eval's headline{' over all ' + str(res['of']) if of else ''} counts unparsed, error and missing "
            f"verdicts as SCORE 0: TP={c['tp']} FP={c['fp']} FN={c['fn']} TN={c['tn']}")


def cmd_calibrate(args) -> int:
    if args.apply:  # add p_success_calibrated to --verdicts
        if args.labels:
            raise ValueError("--labels is for fitting (with DATA); --apply needs no labels")
        cal, prov = calibration.load(args.apply)
        if Path(args.verdicts).resolve() == Path(args.out).resolve():
            raise ValueError("--out must differ from --verdicts (the raw verdict file is kept)")
        if _signal_check(calibration.signal_problems(cal), args.require_signal, f"{args.out} not written"):
            return 1
        n = calibrate_file(args.verdicts, args.out, args.apply)
        print(f"wrote {args.out}: {n} verdict line(s) with p_success_calibrated ({cal.method}, "
              f"T={cal.temperature:.3f}, calibration sha256 {prov['sha256'][:16]}...)")
        return 0
    if not args.data:
        raise ValueError("give DEV, the labelled trajectories the verdicts score, to fit a calibration: "
                         "adaptrubric calibrate DEV --verdicts V.jsonl --out calib.json")
    # a verdict for an id the data lacks would bring its own label, unseen: refused as in eval (--allow-extra)
    table = read(args.verdicts, args.data, "verdicts", args.allow_extra, args.format, args.image_root, args.labels,
                 log=lambda s: print(s, file=sys.stderr))
    if table.coverage.extra:
        print(f"WARNING: {len(table.coverage.extra)} verdict id(s) in {args.verdicts} are not in {args.data}: left out "
              "(--allow-extra)", file=sys.stderr)
    cal = calibration.fit_rows(table.rows, method=args.method, min_examples=args.min_examples)
    cal.fitted_on = {"data": str(args.data), "verdicts": str(args.verdicts),
                     "verdicts_sha256": calibration.file_sha256(args.verdicts)}
    if table.labels:
        cal.fitted_on["labels"] = table.labels.record()
    b, a = cal.before, cal.after
    print(f"{cal.method} scaling on {cal.n} labelled verdicts ({cal.positives} successes): "
          f"T={cal.temperature:.3f}" + (f", b={cal.b:+.3f}" if cal.method == "platt" else ""))
    print(f"on the fitting data: ECE {b['ece']:.4f} -> {a['ece']:.4f}, Brier {b['brier']:.4f} -> {a['brier']:.4f}, "
          f"NLL {b['nll']:.4f} -> {a['nll']:.4f}, p_success std {b['std']:.4f} -> {a['std']:.4f} (held-out figures: "
          "apply it to other verdicts and run eval)")
    if _signal_check(calibration.signal_problems(cal), args.require_signal, f"{args.out} not written"):
        return 1
    sha = cal.save(args.out)
    print(f"wrote {args.out} (sha256 {sha[:16]}...)")
    return 0


def _signal_check(problems: list[str], required: bool, outcome: str) -> bool:
    """Print the signal `problems` (an error with --require-signal, else a warning); True: the command stops."""
    if not problems:
        return False
    head = "adaptrubric: error" if required else "WARNING"
    print(f"{head}: " + "; ".join(problems) + (f" ({outcome}; --require-signal)" if required else
                                                " (--require-signal makes this an error)"), file=sys.stderr)
    return required


def add_subcommands(sub) -> None:
    p = add_command(sub, "review", cmd_review,
                    help="write review.html: every trajectory with what the verifier saw and said",
                    description="Write an offline review page for any verdict file: one card per trajectory "
                                "(instruction, family, cues, selected screenshots with reasons, frames left out, "
                                "compiled evidence, raw output with the parsed block highlighted, SCORE, p_success, "
                                "label, outcome). `eval` writes the same page.", epilog=REVIEW_EXAMPLES)
    add_data_argument(p, "the trajectories the verdicts score (any supported format)")
    p.add_argument("--verdicts", required=True, help="verdict JSONL from `adaptrubric score`")
    p.add_argument("--out", required=True, help="output folder (review.html + review_files/)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_config_arguments(p.add_argument_group("labelling order"), ReviewOrderConfig)
    add_coverage_options(p)
    add_data_options(p)

    p = add_command(sub, "calibrate", cmd_calibrate,
                    help="fit temperature (or Platt) scaling of p_success on labelled verdicts",
                    description="Fit a calibration of p_success on labelled verdicts (DATA, --verdicts) and write it "
                                "to --out; or, with --apply FILE, add p_success_calibrated to a verdict file and write "
                                "the result to --out.", epilog=CALIBRATE_EXAMPLES)
    add_data_argument(p, "labelled trajectories the verdicts score (to fit; not with --apply)", required=False)
    p.add_argument("--verdicts", required=True, help="verdict JSONL with p_success")
    p.add_argument("--out", required=True, help="calibration JSON to write (with --apply: the new verdict file)")
    p.add_argument("--method", choices=["temperature", "platt"], default="temperature",
                   help="temperature: sigmoid(logit(p) / T) (default); platt: sigmoid(a logit(p) + b)")
    p.add_argument("--min-examples", type=int, default=20,
                   help="refuse to fit on fewer labelled verdicts with a probability (default 20)")
    p.add_argument("--apply", metavar="CALIB.json", help="add p_success_calibrated to --verdicts with this file")
    p.add_argument("--require-signal", action="store_true",
                   help="fail (exit 1, nothing written) instead of warning when the fit leaves p_success without "
                        "a learning signal: T at its bound (1000) or calibrated probabilities with a standard "
                        "deviation below 0.05 on the fitting data (with --apply: the file's own fit)")
    add_coverage_options(p, subset=False)
    add_data_options(p)
