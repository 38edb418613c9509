"""Reward-discrimination metrics (paper §5.1, Tables 1 and 5): accuracy, precision, recall, F1,
false-positive rate, confusion matrix, overall and per platform, plus efficiency.

Only verdicts with status "ok" are classified; "unparsed" and "error" verdicts are counted and
reported next to the metrics, never folded into a class. `acc_strict` counts them as wrong, so a
verifier cannot look better by failing to answer. Undefined ratios (no positives, no predicted
positives) are None. Metrics are percentages. Knows nothing about models or files.
"""
from __future__ import annotations

from typing import Iterable, Optional

from ..types import Verdict


def _pct(num: float, den: float) -> Optional[float]:
    return 100.0 * num / den if den else None


def confusion(pairs: Iterable[tuple[int, int]]) -> dict[str, int]:
    """tp/fp/tn/fn from (label, predicted score) pairs."""
    c = {"tp": 0, "fp": 0, "tn": 0, "fn": 0}
    for label, pred in pairs:
        key = ("t" if label == pred else "f") + ("p" if pred == 1 else "n")
        c[key] += 1
    return c


def classification(verdicts: list[Verdict]) -> dict:
    """Metrics for labelled verdicts (label must be set)."""
    ok = [v for v in verdicts if v.status == "ok"]
    c = confusion((v.label, v.score) for v in ok)
    tp, fp, tn, fn = c["tp"], c["fp"], c["tn"], c["fn"]
    prec, rec = _pct(tp, tp + fp), _pct(tp, tp + fn)
    f1 = 2 * prec * rec / (prec + rec) if prec is not None and rec is not None and prec + rec > 0 else (
        0.0 if prec is not None and rec is not None else None)
    n = len(verdicts)
    return {
        "n": n,
        "scored": len(ok),
        "unparsed": sum(v.status == "unparsed" for v in verdicts),
        "errors": sum(v.status == "error" for v in verdicts),
        "positives": sum(v.label == 1 for v in verdicts),
        "acc": _pct(tp + tn, len(ok)),
        "acc_strict": _pct(tp + tn, n),
        "prec": prec,
        "rec": rec,
        "f1": f1,
        "fpr": _pct(fp, fp + tn),
        "confusion": c,
    }


def evaluate(verdicts: list[Verdict]) -> dict:
    """Overall and per-platform metrics; verdicts without a label are left out and counted."""
    labelled = [v for v in verdicts if v.label in (0, 1)]
    per = {}
    for platform in sorted({v.platform or "unknown" for v in labelled}):
        per[platform] = classification([v for v in labelled if (v.platform or "unknown") == platform])
    return {"overall": classification(labelled), "per_platform": per,
            "unlabelled": len(verdicts) - len(labelled)}


def efficiency(verdicts: list[Verdict], run_summary: Optional[dict] = None) -> dict:
    """Calls, tokens and seconds per trajectory (Table 5's columns), from the verdicts and the
    scoring run's summary when available."""
    n = max(1, len(verdicts))
    tokens = sum(v.prompt_tokens + v.completion_tokens for v in verdicts)
    out = {"trajectories": len(verdicts), "tokens": tokens, "tokens_per_traj": tokens / n,
           "images_per_traj": sum(v.n_images for v in verdicts) / n}
    if run_summary:
        for key in ("calls_per_traj", "s_per_traj"):
            if run_summary.get(key) is not None:
                out[key] = run_summary[key]
        if "calls_per_traj" in out:
            out["calls"] = round(out["calls_per_traj"] * len(verdicts))
        if "s_per_traj" in out:
            out["minutes"] = out["s_per_traj"] * len(verdicts) / 60
    return out
