"""How good a verifier's probability is: ranking (AUROC, AUPRC) and calibration (Brier score,
expected calibration error over 15 equal-width bins, the reliability table behind the diagram).

Works on (probability, label) pairs; `summary` takes them from labelled verdicts that carry a
probability (`p_success`, or `p_success_calibrated`) and counts the labelled ones that carry none.
Definitions:
- AUROC: the probability that a random positive gets a higher score than a random negative, ties
  counting one half (Mann-Whitney U / (P * N)); None without both classes.
- AUPRC: average precision, sum over distinct thresholds (descending) of (R_k - R_{k-1}) * P_k,
  tied scores forming one threshold (scikit-learn's `average_precision_score`); None without positives.
- Brier: mean of (p - y)^2.
- ECE: sum over bins of |bin| / n * |mean label - mean p|; bin k holds p in [k/15, (k+1)/15), the
  last bin also holds 1.0.
Knows nothing about files, models or plots.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

ECE_BINS = 15
PROB_FIELDS = ("p_success", "p_success_calibrated")


def checked_pairs(probs: Sequence[float], labels: Sequence[int]) -> list[tuple[float, int]]:
    if len(probs) != len(labels):
        raise ValueError(f"{len(probs)} probabilities but {len(labels)} labels")
    out = []
    for p, y in zip(probs, labels):
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"probability {p!r} is outside [0, 1]")
        if y not in (0, 1):
            raise ValueError(f"label {y!r} is not 0 or 1")
        out.append((float(p), int(y)))
    return out


def auroc(probs: Sequence[float], labels: Sequence[int]) -> float | None:
    """Area under the ROC curve by average ranks (ties count one half); None without both classes."""
    pairs = sorted(checked_pairs(probs, labels))
    pos = sum(y for _, y in pairs)
    neg = len(pairs) - pos
    if not pos or not neg:
        return None
    rank_sum, i = 0.0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        avg_rank = (i + 1 + j) / 2  # ranks i+1 .. j share their mean
        rank_sum += avg_rank * sum(y for _, y in pairs[i:j])
        i = j
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


def auprc(probs: Sequence[float], labels: Sequence[int]) -> float | None:
    """Average precision over distinct thresholds; None without positives."""
    pairs = sorted(checked_pairs(probs, labels), key=lambda t: -t[0])
    pos = sum(y for _, y in pairs)
    if not pos:
        return None
    ap, tp, seen, prev_recall, i = 0.0, 0, 0, 0.0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            tp += pairs[j][1]
            j += 1
        seen = j
        recall = tp / pos
        ap += (recall - prev_recall) * (tp / seen)
        prev_recall, i = recall, j
    return ap


def brier(probs: Sequence[float], labels: Sequence[int]) -> float | None:
    """Mean squared difference between probability and label; None when empty."""
    pairs = checked_pairs(probs, labels)
    return sum((p - y) ** 2 for p, y in pairs) / len(pairs) if pairs else None


def bin_of(p: float, bins: int = ECE_BINS) -> int:
    """The equal-width bin of a probability: [k/bins, (k+1)/bins), 1.0 in the last bin."""
    return min(int(p * bins), bins - 1)


def reliability(probs: Sequence[float], labels: Sequence[int], bins: int = ECE_BINS) -> list[dict]:
    """One row per non-empty bin: its edges, count, mean probability and fraction of positives."""
    acc: dict[int, list[tuple[float, int]]] = {}
    for p, y in checked_pairs(probs, labels):
        acc.setdefault(bin_of(p, bins), []).append((p, y))
    return [{"lo": k / bins, "hi": (k + 1) / bins, "n": len(v), "mean_p": sum(p for p, _ in v) / len(v),
             "frac_pos": sum(y for _, y in v) / len(v)} for k, v in sorted(acc.items())]


def ece(probs: Sequence[float], labels: Sequence[int], bins: int = ECE_BINS) -> float | None:
    """Expected calibration error over `bins` equal-width bins; None when empty."""
    rows = reliability(probs, labels, bins)
    n = sum(r["n"] for r in rows)
    return sum(r["n"] / n * abs(r["frac_pos"] - r["mean_p"]) for r in rows) if n else None


def figures(probs: Sequence[float], labels: Sequence[int], bins: int = ECE_BINS) -> dict:
    """AUROC, AUPRC, Brier, ECE and the reliability rows of (probability, label) pairs."""
    return {"n": len(probs), "positives": int(sum(labels)), "auroc": auroc(probs, labels),
            "auprc": auprc(probs, labels), "brier": brier(probs, labels), "ece": ece(probs, labels, bins),
            "ece_bins": bins, "reliability": reliability(probs, labels, bins)}


def summary(verdicts: Iterable, field: str = "p_success") -> dict | None:
    """`figures` over the labelled verdicts whose `field` is set, with how many labelled verdicts
    lacked it; None when no labelled verdict has it."""
    labelled = [v for v in verdicts if getattr(v, "label", None) in (0, 1)]
    have = [v for v in labelled if getattr(v, field, None) is not None]
    if not have:
        return None
    out = figures([float(getattr(v, field)) for v in have], [int(v.label) for v in have])
    out.update(field=field, without_probability=len(labelled) - len(have),
               statuses={s: sum(v.status == s for v in have) for s in sorted({v.status for v in have})})
    return out


def summaries(verdicts: list) -> dict:
    """field -> summary, for each probability field some labelled verdict carries."""
    out = {}
    for f in PROB_FIELDS:
        s = summary(verdicts, f)
        if s is not None:
            out[f] = s
    return out
