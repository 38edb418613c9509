"""How good a verifier's probability is: ranking (AUROC, AUPRC) and calibration (Brier score,
expected calibration error over 15 equal-width bins, the reliability table behind the diagram), on
arrays of probabilities and 0/1 labels.
- AUROC: P(a random positive scores above a random negative), ties one half; None without both classes.
- AUPRC: average precision over distinct thresholds, tied scores one threshold (scikit-learn's
  `average_precision_score`); None without positives.
- Brier: mean of (p - y)^2.
- ECE: sum over bins of |bin| / n * |mean label - mean p|; bin k holds p in [k/15, (k+1)/15), the last
  also 1.0.
Knows nothing about files, models or plots.
"""
from __future__ import annotations

import numpy as np

ECE_BINS = 15


def figures(p: np.ndarray, y: np.ndarray, bins: int = ECE_BINS) -> dict:
    """AUROC, AUPRC, Brier, ECE and the reliability rows of probabilities `p` and 0/1 labels `y`."""
    if ((p < 0) | (p > 1)).any():
        raise ValueError(f"probability {float(p[(p < 0) | (p > 1)][0])!r} is outside [0, 1]")
    n, pos = len(p), int(y.sum(dtype=np.int64))
    neg = n - pos
    order = np.argsort(p, kind="stable")
    sp, sy = p[order], y[order]
    del order
    flags = np.ones(n, bool)
    np.not_equal(sp[1:], sp[:-1], out=flags[1:])
    start = np.flatnonzero(flags)  # the first of each run of equal p (sp is sorted)
    del flags
    count = np.diff(np.append(start, n))
    group_pos = np.add.reduceat(sy, start, dtype=np.int64) if n else np.zeros(0, np.int64)
    del sp, sy
    auroc = (float((((2 * start + 1 + count) / 2) * group_pos).sum()) - pos * (pos + 1) / 2) / (pos * neg) \
        if pos and neg else None
    auprc = None
    if pos:  # thresholds from the highest p down
        tp = np.cumsum(group_pos[::-1])
        seen = np.cumsum(count[::-1])
        recall = tp / pos
        terms = (recall - np.concatenate([[0.0], recall[:-1]])) * (tp / seen)
        auprc = float(np.add.accumulate(terms)[-1])
    brier = float(((p - y) ** 2).sum() / n) if n else None
    b = (p * bins).astype(np.int16)
    np.minimum(b, bins - 1, out=b)
    rel = []
    for k in np.unique(b):
        mask = b == k
        rel.append({"lo": k / bins, "hi": (k + 1) / bins, "n": int(mask.sum()), "mean_p": float(p[mask].mean()),
                    "frac_pos": float(y[mask].mean())})
    ece = sum(r["n"] / n * abs(r["frac_pos"] - r["mean_p"]) for r in rel) if n else None
    return {"n": n, "positives": pos, "auroc": auroc, "auprc": auprc, "brier": brier, "ece": ece, "ece_bins": bins,
            "reliability": [{**r, "lo": float(r["lo"]), "hi": float(r["hi"])} for r in rel]}

