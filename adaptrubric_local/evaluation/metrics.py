"""Reward-discrimination metrics (paper §5.1, Tables 1 and 5): accuracy, precision, recall, F1,
false-positive rate, confusion matrix, overall and per platform, plus efficiency.

The headline numbers classify every labelled trajectory, as the paper does (its accuracies have
fixed denominators, k/77, k/188): an "unparsed" or "error" verdict gave no success signal, and a
"missing" one (a trajectory of the data set the verdict file has no line for) gave none either, so
each counts as a predicted failure (SCORE 0), and how many did so is shown beside the numbers. The same
metrics over the scored verdicts alone are kept in a `scored_only` block, and `acc_strict` counts
every unanswered trajectory as wrong, so a verifier cannot look better by failing to answer.
Undefined ratios (no positives, no predicted positives) are None. Metrics are percentages.
Knows nothing about models or files.
"""
from __future__ import annotations

from collections.abc import Iterable

from ..types import Verdict


def _pct(num: float, den: float) -> float | None:
    return 100.0 * num / den if den else None


def confusion(pairs: Iterable[tuple[int, int]]) -> dict[str, int]:
    """tp/fp/tn/fn from (label, predicted score) pairs."""
    c = {"tp": 0, "fp": 0, "tn": 0, "fn": 0}
    for label, pred in pairs:
        key = ("t" if label == pred else "f") + ("p" if pred == 1 else "n")
        c[key] += 1
    return c


def rates(c: dict[str, int]) -> dict:
    """Acc / Prec / Rec / F1 / FPR (percentages, None when undefined) of a confusion matrix."""
    tp, fp, tn, fn = c["tp"], c["fp"], c["tn"], c["fn"]
    prec, rec = _pct(tp, tp + fp), _pct(tp, tp + fn)
    f1 = 2 * prec * rec / (prec + rec) if prec is not None and rec is not None and prec + rec > 0 else (
        0.0 if prec is not None and rec is not None else None)
    return {"acc": _pct(tp + tn, tp + fp + tn + fn), "prec": prec, "rec": rec, "f1": f1, "fpr": _pct(fp, fp + tn)}


def predicted(v: Verdict) -> int:
    """The verdict as a class: its score when scored, else a predicted failure (0)."""
    return v.score if v.status == "ok" and v.score in (0, 1) else 0


def classification(verdicts: list[Verdict]) -> dict:
    """Metrics for labelled verdicts (label must be set): the headline over all of them, with
    unparsed/error/missing verdicts as predicted failures, and `scored_only` over the scored ones."""
    ok = [v for v in verdicts if v.status == "ok"]
    unanswered = [v for v in verdicts if v.status != "ok"]
    c_all = confusion((v.label, predicted(v)) for v in verdicts)
    c_ok = confusion((v.label, v.score) for v in ok)
    n = len(verdicts)
    return {
        "n": n,
        "scored": len(ok),
        "unparsed": sum(v.status == "unparsed" for v in verdicts),
        "errors": sum(v.status == "error" for v in verdicts),
        "missing": sum(v.status == "missing" for v in verdicts),
        "positives": sum(v.label == 1 for v in verdicts),
        "hit_cap": sum(bool(getattr(v, "hit_cap", False)) for v in verdicts),
        "hit_context": sum(bool(getattr(v, "hit_context", False)) for v in verdicts),
        **rates(c_all),
        "confusion": c_all,
        # unparsed/error/missing verdicts in the headline confusion: label 1 -> fn, label 0 -> tn
        "unanswered_as_fail": {"fn": sum(v.label == 1 for v in unanswered), "tn": sum(v.label == 0 for v in unanswered)},
        "acc_strict": _pct(c_ok["tp"] + c_ok["tn"], n),
        "scored_only": {"n": len(ok), **rates(c_ok), "confusion": c_ok},
    }


def evaluate(verdicts: list[Verdict]) -> dict:
    """Overall and per-platform metrics; verdicts without a label are left out and counted."""
    labelled = [v for v in verdicts if v.label in (0, 1)]
    per = {}
    for platform in sorted({v.platform or "unknown" for v in labelled}):
        per[platform] = classification([v for v in labelled if (v.platform or "unknown") == platform])
    return {"overall": classification(labelled), "per_platform": per,
            "unlabelled": len(verdicts) - len(labelled)}


def _cost(v: Verdict) -> tuple[float, float, bool]:
    """(tokens, calls, whether the verdict carried its full cost) for one verdict. Verdicts that
    predate the cost fields count their own verifier call only (none for a record that failed
    before reaching the model)."""
    tokens, calls = getattr(v, "cost_tokens", 0) or 0, getattr(v, "cost_calls", 0) or 0
    if tokens or calls:
        return float(tokens), float(calls), True
    own = v.prompt_tokens + v.completion_tokens
    return float(own), float(1 if own or v.status != "error" else 0), False


def efficiency(verdicts: list[Verdict], run_summary: dict | None = None) -> dict:
    """Calls, tokens and seconds per trajectory (Table 5's columns). Calls and tokens come from the
    verdicts (every model call, router and cue calls split over the trajectories that shared
    them), so `eval` and `score` agree and a resumed run counts every part; seconds come from the
    scoring run's summary when available. The figures are over the trajectories the verifier
    answered (ok or unparsed); error lines are counted apart (`errors`, `error_calls`)."""
    answered = [v for v in verdicts if v.status != "error"]
    n = len(answered)
    costs = [_cost(v) for v in answered]
    full = sum(c[2] for c in costs)
    tokens, calls = sum(c[0] for c in costs), sum(c[1] for c in costs)
    out = {"trajectories": n, "tokens": tokens, "calls": calls,
           "tokens_per_traj": tokens / max(1, n), "calls_per_traj": calls / max(1, n),
           "images_per_traj": sum(v.n_images for v in answered) / max(1, n),
           "accounting": accounting_text(full, n), "errors": len(verdicts) - n,
           "error_calls": sum(_cost(v)[1] for v in verdicts if v.status == "error")}
    if run_summary and run_summary.get("s_per_traj") is not None:
        out["s_per_traj"] = run_summary["s_per_traj"]
        out["minutes"] = out["s_per_traj"] * n / 60
    return out


def accounting_text(full: int, n: int) -> str:
    """Which model calls the efficiency figures count."""
    if full == n and n:
        return "all model calls (router, cues, verifier), amortised per trajectory"
    if full == 0:
        return "verifier calls only (the verdicts carry no cost fields)"
    return f"mixed: {full} of {n} verdicts carry all model calls, the rest the verifier's only"
