"""What the order of the review page's cards buys a person who labels them (`adaptrubric review
--order`): calibration from the first 50 or 100 labels, and wrong verdicts found among the first 50.

The verifier is eval/calibration_data.py's synthetic over-confident one: each trajectory succeeds
with a true probability q ~ U(0.02, 0.98) and the verifier reports p = sigmoid(3 logit(q)), SCORE 1
when p >= 0.5. Every draw is a fresh pool of unlabelled verdicts; the package's own ordering
(`evaluation.review_order.arrange`, what `review --order` runs) picks the cards, their labels are
revealed, and:

1. calibration: temperature scaling fitted on the chosen 50 (100) labels, held-out ECE (15 bins) on
   --test verdicts, mean and worst over --repeats draws, for `uncertain` and `random`;
2. finding errors: wrong verdicts (SCORE != label) among the first 50 cards of each order, mean and
   fewest over the draws. `disagree` compares with a second verifier that sees q through its own
   noise (logit(p_B) = logit(q) + N(0, 1)), like a teacher next to its student; `fp-first` needs
   the labels already (it sorts by outcome), so it is shown for reference only.

    python eval/label_order.py            # about 4 s on one core
    python eval/label_order.py --ci       # a small run for the test suite
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_data import draw, ece

from adaptrubric_local.evaluation import calibration as C
from adaptrubric_local.evaluation.review_order import arrange
from adaptrubric_local.types import Verdict

ERROR_ORDERS = ("uncertain", "disagree", "random", "fp-first")



def pool(n: int, seed: int, sharpen: float) -> tuple[list[Verdict], dict[str, Verdict], dict[str, int]]:
    """(unlabelled verdicts of the synthetic verifier, a second verifier's verdicts, the hidden labels)."""
    ps, ys, qs = draw(n, seed, sharpen)
    rng = random.Random(seed + 1_000_000)
    a, b, labels = [], {}, {}
    for i, (p, y, q) in enumerate(zip(ps, ys, qs)):
        tid = f"t{i}"
        a.append(Verdict(id=tid, score=int(p >= 0.5), p_success=p, status="ok"))
        pb = 1 / (1 + math.exp(-(math.log(q / (1 - q)) + rng.gauss(0, 1))))
        b[tid] = Verdict(id=tid, score=int(pb >= 0.5), p_success=pb, status="ok")
        labels[tid] = y
    return a, b, labels


def calibration_row(size: int, order: str, args, test) -> list[float]:
    """Held-out ECE after fitting on the first `size` cards of `order`, one per draw."""
    tp, ty = test
    out = []
    for r in range(args.repeats):
        verdicts, _, labels = pool(args.pool, r, args.sharpen)
        chosen = [v for v, _ in arrange(verdicts, order, seed=r, budget=size)]
        try:
            cal = C.fit([v.p_success for v in chosen], [labels[v.id] for v in chosen], "temperature")
        except ValueError:  # one class only among the chosen: no fit possible, the raw ECE stands
            out.append(ece(tp, ty))
            continue
        out.append(ece([cal.apply(p) for p in tp], ty))
    return out


def errors_row(order: str, args, first: int = 50) -> list[int]:
    """Wrong verdicts among the first `first` cards of `order`, one count per draw."""
    out = []
    for r in range(args.repeats):
        verdicts, other, labels = pool(args.pool, r, args.sharpen)
        if order == "fp-first":  # sorts by outcome: only possible once the labels are known
            verdicts = [replace(v, label=labels[v.id]) for v in verdicts]
        chosen = [v for v, _ in arrange(verdicts, order, compare=other, seed=r, budget=first)]
        out.append(sum(v.score != labels[v.id] for v in chosen))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sharpen", type=float, default=3.0)
    ap.add_argument("--pool", type=int, default=2000, help="unlabelled verdicts per draw (the cards to order)")
    ap.add_argument("--test", type=int, default=3000, help="held-out verdicts for ECE")
    ap.add_argument("--repeats", type=int, default=20, help="draws per figure")
    ap.add_argument("--sizes", default="50,100", help="labels per calibration")
    ap.add_argument("--ci", action="store_true", help="a small run (pool 400, test 600, 3 draws)")
    args = ap.parse_args(argv)
    if args.ci:
        args.pool, args.test, args.repeats = 400, 600, 3
    tp, ty, tq = draw(args.test, 10_000, args.sharpen)
    print(f"synthetic verifier 3x too sharp; pools of {args.pool} unlabelled verdicts, {args.repeats} draws; "
          f"held-out ECE on {args.test}: raw {ece(tp, ty):.4f}, floor (true q) {ece(tq, ty):.4f}")
    result = {"calibration": {}, "errors": {}}
    print(f"\n{'labels':>6} | {'order':<9} | {'held-out ECE: mean':>18} | {'worst of ' + str(args.repeats):>11}")
    for size in (int(x) for x in args.sizes.split(",")):
        for order in ("uncertain", "random"):
            e = calibration_row(size, order, args, (tp, ty))
            result["calibration"][(size, order)] = e
            print(f"{size:>6} | {order:<9} | {statistics.mean(e):>18.4f} | {max(e):>11.4f}")
    print(f"\n{'order':<9} | wrong verdicts among the first 50 cards: mean | fewest of {args.repeats}")
    for order in ERROR_ORDERS:
        w = errors_row(order, args)
        result["errors"][order] = w
        note = "  (needs the labels already)" if order == "fp-first" else ""
        print(f"{order:<9} | {statistics.mean(w):>45.1f} | {min(w):>11}{note}")
    main.result = result
    return 0


if __name__ == "__main__":
    sys.exit(main())
