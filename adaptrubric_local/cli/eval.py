"""Evaluation subcommands (`eval`, `ablate`, `tts`, `compare`), registered by `cli/`.
Argument handling only; the work is in `evaluation.harness`.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from ..evaluation.benchmark_figures import BOOTSTRAP, SEED, render_table
from ..evaluation.harness import run_ablation, run_eval, run_tts
from ..evaluation.report import fmt
from ..evaluation.review_sample import REVIEW_CARDS
from ..evaluation.vote_rules import render_table as render_vote_rules
from ..flags import common
from ..labels import read_labels
from ..pipeline import AdaptRubric
from .common import (
    add_command,
    add_coverage_options,
    add_data_argument,
    add_out_option,
    add_scoring_options,
    labels_files,
    load_labelled,
    make_engine,
    pipeline_config,
    print_coverage,
    score_with_model,
)

EXAMPLES = """examples:
  adaptrubric eval runs/synth/trajectories.jsonl --verdicts runs/verdicts.jsonl --out runs/eval
  adaptrubric eval ../data/androidgen --model Qwen/Qwen3-VL-8B-Instruct --out runs/eval-8b
  adaptrubric eval DATA --openai-url http://HOST:8000/v1 --model Qwen/Qwen3-VL-8B-Instruct --out runs/eval-8b
  adaptrubric ablate runs/synth/trajectories.jsonl --model runs/tiny --out runs/ablate
  adaptrubric tts runs/synth/trajectories.jsonl --verdicts runs/verdicts.jsonl --out runs/tts
  adaptrubric tts --verdicts runs/verdicts.jsonl --out runs/tts    # the labels and task ids in the verdicts
  adaptrubric eval DATA --verdicts verdicts.jsonl --labels labels.jsonl --out runs/eval   # the page's labels
  adaptrubric compare runs/eval-4b runs/eval-8b --out runs/compare   # + both reliability diagrams
"""


def _score_first(args, out: Path) -> Path:
    vpath = out / "verdicts.jsonl"
    vpath.unlink(missing_ok=True)
    score_with_model(args, vpath, pipeline_config(args))
    return vpath


def cmd_eval(args) -> int:
    from ..evaluation.image_roots import outside_image_roots

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if bool(args.verdicts) == bool(args.model):
        raise ValueError("give exactly one of --verdicts V.jsonl (score already done) or --model M (score first)")
    if args.review_cards < 0:
        raise ValueError(f"--review-cards must be 0 (every card) or more, got {args.review_cards}")
    if args.bootstrap < 0:
        raise ValueError(f"--bootstrap must be 0 (no intervals) or more, got {args.bootstrap}")
    files, loaded, labels = list(args.labels or []), None, None
    if args.model:  # the data loaded once, for scoring and eval; a bad labels file stops the command early
        loaded, labels = load_labelled(args)
        outside_image_roots(loaded, args.data)
        files = []
    vpath = Path(args.verdicts) if args.verdicts else _score_first(args, out)
    m = run_eval(vpath, out, args.data, loaded, review=args.review, progress=not args.quiet, labels=labels,
                 subset=args.subset, allow_extra=args.allow_extra, fmt=args.format, image_roots=args.image_root,
                 review_cards=args.review_cards, labels_files=files, bootstrap=args.bootstrap, seed=args.seed,
                 log=None if loaded is not None else (lambda s: print(s, file=sys.stderr)))
    print_coverage(m)
    o, e = m["overall"], m["efficiency"]
    print(f"n={o['n']} scored={o['scored']} unparsed={o['unparsed']} errors={o['errors']} missing={o['missing']} "
          f"(counted as SCORE 0)  "
          f"acc={fmt(o['acc'])} prec={fmt(o['prec'])} rec={fmt(o['rec'])} f1={fmt(o['f1'])} fpr={fmt(o['fpr'])}  "
          f"| scored only: acc={fmt(o['scored_only']['acc'])} f1={fmt(o['scored_only']['f1'])}")
    print(render_table(m["benchmark"]))
    if m.get("vote_rules"):
        print(render_vote_rules(m["vote_rules"]))
    print(f"calls/traj={e['calls_per_traj']:.2f} tokens/traj={e['tokens_per_traj']:.0f} ({e['accounting']}"
          + (f"; over {e['trajectories']} answered, errors: {e['errors']}" if e.get("errors") else "") + ")")
    for name, s in m["probability"].items():
        print(f"{name} over {s['n']} labelled verdicts: AUROC={fmt(s['auroc'], 4)} AUPRC={fmt(s['auprc'], 4)} "
              f"Brier={fmt(s['brier'], 4)} ECE={fmt(s['ece'], 4)} (15 bins)")
    print(f"wrote {out}/metrics.json, report.md, confusion.png, per_platform.png, calibration.png"
          + (", review.html" if args.review else ""))
    return 0


def cmd_tts(args) -> int:
    if bool(args.verdicts) == bool(args.model):
        raise ValueError("give exactly one of --verdicts V.jsonl or --model M")
    for f in labels_files(args):  # before scoring: a bad labels file stops the command early
        read_labels(f)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    vpath = Path(args.verdicts) if args.verdicts else _score_first(args, out)
    res = run_tts(vpath, out, args.data, max_n=args.max_n, seed=args.seed, subset=args.subset,
                  allow_extra=args.allow_extra, fmt=args.format, image_roots=args.image_root,
                  labels_files=args.labels or (), log=lambda s: print(s, file=sys.stderr))
    print_coverage(res)
    n = max(res["random"])
    if not res["informative"]:
        print(res["note"])
    else:
        print(f"{res['pool']['tasks']} tasks; SR@{n}: EarlyStop {res['earlystop'][n]:.2f}, BestOfN "
              f"{res['bestofn'][n]:.2f}, Random {res['random'][n]:.2f}, Oracle {res['oracle'][n]:.2f}; headroom "
              f"{res['pool']['headroom']:+.2f}")
    print(f"wrote {out}/tts.json, report.md, tts.png")
    return 0


def cmd_ablate(args) -> int:
    from ..formats import load_trajectories

    cfg = pipeline_config(args)
    loaded = load_trajectories(args.data, fmt=args.format, image_roots=args.image_root)
    with contextlib.closing(make_engine(args, cfg)) as engine:
        res = run_ablation(AdaptRubric(engine, cfg), args.data, args.out, progress=not args.quiet, loaded=loaded)
    for name, row in res["settings"].items():
        o, d = row["overall"], row["delta"]
        print(f"{name:<10} acc={fmt(o['acc'])} ({fmt(d['acc'], signed=True)})  f1={fmt(o['f1'])} "
              f"({fmt(d['f1'], signed=True)})  unparsed={o['unparsed']}")
    print(f"wrote {args.out}/ablation.json, report.md (routes and cues computed once: {res['run']['shared_calls']})")
    return 0


def cmd_compare(args) -> int:
    from ..evaluation.compare import compare

    print(compare(args.dir_a, args.dir_b, args.out))
    if args.out:
        print(f"wrote {args.out}/calibration.png (both runs' reliability diagrams)")
    return 0


def add_subcommands(sub) -> None:
    def scoring_opts(p):
        common(p.add_argument("--quiet", action="store_true", help="no progress bar"), "output")
        add_scoring_options(p)

    p = add_command(sub, "eval", cmd_eval, epilog=EXAMPLES,
                    help="accuracy/precision/recall/F1/FPR overall and per platform, with a report",
                    description="Evaluate verdicts against the data set's labels (or score first with --model). "
                                "Writes metrics.json, report.md, confusion.png, per_platform.png, calibration.png "
                                "(p_success: AUROC, AUPRC, Brier, ECE) and review.html to --out.")
    add_data_argument(p, "labelled trajectories (any supported format)")
    common(p.add_argument("--verdicts", help="verdict JSONL from `adaptrubric score` (or score first with --model)"),
           "data")
    add_out_option(p, "output folder")
    p.add_argument("--review", action=argparse.BooleanOptionalAction, default=True,
                   help="also write review.html, every trajectory with what the verifier saw (default on)")
    p.add_argument("--review-cards", type=int, default=REVIEW_CARDS, metavar="N",
                   help=f"a run of more than N verdicts gets a review page of a sample of N of them, drawn by a "
                        f"seeded hash of the id (default {REVIEW_CARDS}; 0: every card)")
    p.add_argument("--bootstrap", type=int, default=BOOTSTRAP, metavar="N",
                   help=f"resamples of the benchmark figures' 95%% intervals (default {BOOTSTRAP}; 0: none)")
    p.add_argument("--seed", type=int, default=SEED, help=f"seed of the bootstrap resamples (default {SEED})")
    add_coverage_options(p)
    scoring_opts(p)

    p = add_command(sub, "ablate", cmd_ablate, help="the four coarse/fine settings of Table 4 in one run, with deltas",
                    epilog=EXAMPLES)
    add_data_argument(p, "labelled trajectories (any supported format)")
    add_out_option(p, "output folder (one subfolder per setting)")
    scoring_opts(p)

    p = add_command(sub, "tts", cmd_tts, help="test-time scaling: EarlyStop/BestOfN/Random/Oracle SR@N by task_id",
                    epilog=EXAMPLES)
    add_data_argument(p, "labelled trajectories with task_id (without it: the labels and task ids in the verdicts)",
                      required=False)
    common(p.add_argument("--verdicts", help="verdict JSONL (or score DATA first with --model)"), "data")
    add_out_option(p, "output folder")
    p.add_argument("--max-n", type=int, help="largest N (default: most candidates of any task)")
    p.add_argument("--seed", type=int, default=42, help="per-task shuffle seed (default 42, as in the paper)")
    add_coverage_options(p)
    scoring_opts(p)

    p = add_command(sub, "compare", cmd_compare,
                    help="print the differences between two eval/tts/ablate result folders", epilog=EXAMPLES)
    p.add_argument("dir_a")
    p.add_argument("dir_b")
    p.add_argument("--out", help="also draw both eval runs' reliability diagrams into OUT/calibration.png")
