"""How much labelled data temperature (and Platt) scaling needs: fits on dev sets of growing size
drawn from a synthetic over-confident verifier and prints the held-out ECE (15 bins) it reaches.

The verifier: each trajectory succeeds with a true probability q ~ U(0.02, 0.98); the verifier
reports sigmoid(k * logit(q)) with k = --sharpen (3: far too sure, as a distilled student trained
on hard 0/1 labels can be). Held-out ECE is measured on --test verdicts; with a finite test set
ECE never reaches 0 (its floor is printed as "perfect": the true q scored the same way).

    python eval/calibration_data.py                  # about 20 s on one core
    python eval/calibration_data.py --test 300 --repeats 2 --sizes 20,50     # a check in seconds (CI)

Exits 1 when a dev size could not be fitted at all.
"""
from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from adaptrubric_local.evaluation import calibration as C
from adaptrubric_local.evaluation.probability import figures


def ece(probs, labels) -> float:
    """The expected calibration error of probabilities and their 0/1 labels (probability.py)."""
    return figures(np.asarray(probs, dtype=float), np.asarray(labels))["ece"]


def draw(n: int, seed: int, sharpen: float) -> tuple[list[float], list[int], list[float]]:
    """(reported p, labels, true q) for n trajectories."""
    rng = random.Random(seed)
    ps, ys, qs = [], [], []
    for _ in range(n):
        q = rng.uniform(0.02, 0.98)
        ys.append(int(rng.random() < q))
        ps.append(1 / (1 + math.exp(-sharpen * math.log(q / (1 - q)))))
        qs.append(q)
    return ps, ys, qs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--sharpen", type=float, default=3.0)
    ap.add_argument("--test", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=20, help="dev sets drawn per size")
    ap.add_argument("--sizes", default="20,50,100,200,500,1000")
    args = ap.parse_args()
    tp, ty, tq = draw(args.test, 10_000, args.sharpen)
    print(f"held-out: {args.test} verdicts; ECE raw {ece(tp, ty):.4f}, perfect (true q) {ece(tq, ty):.4f}")
    print(f"{'dev size':>8} | {'temperature: mean ECE':>22} | {'worst of ' + str(args.repeats):>12} | "
          f"{'platt: mean ECE':>16} | {'fitted T (mean)':>15}")
    for n in (int(x) for x in args.sizes.split(",")):
        res = {"temperature": [], "platt": []}
        temps = []
        for r in range(args.repeats):
            dp, dy, _ = draw(n, r, args.sharpen)
            for m in res:
                try:
                    cal = C.fit(dp, dy, m)
                except ValueError:
                    continue
                res[m].append(ece([cal.apply(p) for p in tp], ty))
                if m == "temperature":
                    temps.append(cal.temperature)
        t, p = res["temperature"], res["platt"]
        if not t or not p:
            print(f"CHECK FAILED: no dev set of {n} could be fitted ({len(t)} temperature, {len(p)} Platt fits)",
                  file=sys.stderr)
            return 1
        print(f"{n:>8} | {sum(t) / len(t):>22.4f} | {max(t):>12.4f} | {sum(p) / len(p):>16.4f} | "
              f"{sum(temps) / len(temps):>15.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
