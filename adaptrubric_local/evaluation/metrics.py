"""Reward-discrimination metrics (paper §5.1, Tables 1 and 5): accuracy, precision, recall, F1,
false-positive rate, confusion matrix, overall and per platform, plus efficiency.

The headline classifies every labelled trajectory, as the paper does (fixed denominators, k/77, k/188):
an "unparsed", "error" or "missing" verdict (a trajectory the verdict file has no line for) gave no
success signal, so it counts as a predicted failure (SCORE 0), and how many did so is shown. The
`scored_only` block has the figures of the scored verdicts alone, and `acc_strict` counts every
unanswered trajectory as wrong. Undefined ratios are None; metrics are percentages, from
benchmark_figures.py's `counts` and `rates`. Computed over a verdict table's rows (verdict_table.py);
`classification`, `evaluate` and `efficiency` take verdicts in memory. Knows nothing about models or files.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..types import Verdict
from . import probability
from .benchmark_figures import counts, rates
from .verdict_table import ERROR, MISSING, OK, STATUSES, UNPARSED, Rows, of_verdicts

PROB_FIELDS = {"p_success": "p_success", "p_success_calibrated": "p_calibrated"}  # field -> table column


def predicted(v: Verdict) -> int:
    """The verdict as a class: its score when scored, else a predicted failure (0)."""
    return v.score if v.status == "ok" and v.score in (0, 1) else 0


def classify(rows: Rows) -> dict:
    """Metrics of labelled rows: the headline over all of them, with unparsed/error/missing verdicts as
    predicted failures, and `scored_only` over the scored ones."""
    status, label, score = rows["status"], rows["label"], rows["score"]
    ok = status == OK
    c_all = counts(np.where(ok & (score >= 0), score, 0), label)
    c_ok = counts(np.where(score[ok] >= 0, score[ok], -1), label[ok])
    return {"n": len(status), "scored": int(ok.sum()), "unparsed": int((status == UNPARSED).sum()),
            "errors": int((status == ERROR).sum()), "missing": int((status == MISSING).sum()),
            "positives": int((label == 1).sum()), "hit_cap": int(rows["hit_cap"].sum()),
            "hit_context": int(rows["hit_context"].sum()), **rates(c_all), "confusion": c_all,
            # unparsed/error/missing verdicts in the headline confusion: label 1 -> fn, label 0 -> tn
            "unanswered_as_fail": {"fn": int((label[~ok] == 1).sum()), "tn": int((label[~ok] == 0).sum())},
            "acc_strict": 100.0 * (c_ok["tp"] + c_ok["tn"]) / len(status) if len(status) else None,
            "scored_only": {"n": int(ok.sum()), **rates(c_ok), "confusion": c_ok}}


def by_platform(rows: Rows, platforms: dict[str | None, int]) -> dict:
    """Overall and per-platform metrics (`platforms`: name -> code of the platform column); rows without a
    label are left out and counted."""
    codes: dict[str, list[int]] = {}
    for name, code in platforms.items():
        codes.setdefault(name or "unknown", []).append(code)
    labelled = rows["label"] >= 0
    sub = rows if labelled.all() else {k: a[labelled] for k, a in rows.items()}
    per = {}
    for name in sorted(codes):
        mask = np.isin(sub["platform"], codes[name])
        if mask.any():
            per[name] = classify(sub if mask.all() else {k: a[mask] for k, a in sub.items()})
    return {"overall": classify(sub), "per_platform": per, "unlabelled": int((~labelled).sum())}


def costs(rows: Rows, run_summary: dict | None = None) -> dict:
    """Calls, tokens and seconds per trajectory (Table 5's columns) over the trajectories the verifier
    answered (ok or unparsed). Calls and tokens come from the verdicts' cost fields (every model call,
    shared ones split), else their own verifier call (none for a record that never reached the model);
    seconds from the scoring run's summary. Error lines are counted apart (`errors`, `error_calls`)."""
    status, tokens, calls, verifier_tokens = (rows[k] for k in ("status", "cost_tokens", "cost_calls", "verifier_tokens"))
    in_file = status != MISSING
    full = (tokens != 0) | (calls != 0)  # the verdict's own cost fields, else its call's tokens and one call
    called = (verifier_tokens > 0) | (status != ERROR)  # a verifier call was made
    answered, errors = in_file & (status != ERROR), in_file & (status == ERROR)
    n = int(answered.sum())

    def spent(which):
        t = float(tokens.sum(where=which & full)) + float(verifier_tokens.sum(where=which & ~full, dtype=np.float64))
        return t, float(calls.sum(where=which & full)) + float((which & ~full & called).sum())

    (t, c), (_, error_calls) = spent(answered), spent(errors)
    out = {"trajectories": n, "tokens": t, "calls": c, "tokens_per_traj": t / max(1, n),
           "calls_per_traj": c / max(1, n),
           "images_per_traj": float(rows["images"].sum(where=answered, dtype=np.float64)) / max(1, n),
           "accounting": accounting_text(int((full & answered).sum()), n), "errors": int(errors.sum()),
           "error_calls": error_calls}
    if run_summary and run_summary.get("s_per_traj") is not None:
        out["s_per_traj"] = run_summary["s_per_traj"]
        out["minutes"] = out["s_per_traj"] * n / 60
    return out


def probabilities(rows: Rows) -> dict:
    """field -> `figures` over the labelled rows the file holds (missing rows left out) whose field is set,
    with how many labelled rows lacked it and the statuses of those counted; a field no row has is left out."""
    labelled = (rows["status"] != MISSING) & (rows["label"] >= 0)
    out = {}
    for name, column in PROB_FIELDS.items():
        have = labelled & ~np.isnan(rows[column])
        if not have.any():
            continue
        status = rows["status"][have]
        out[name] = {**probability.figures(rows[column][have], rows["label"][have]), "field": name,
                     "without_probability": int(labelled.sum() - have.sum()),
                     "statuses": dict(sorted((STATUSES[k], int((status == k).sum())) for k in set(status.tolist())))}
    return out


def accounting_text(full: int, n: int) -> str:
    """Which model calls the efficiency figures count."""
    if full == n and n:
        return "all model calls (router, cues, verifier), amortised per trajectory"
    if full == 0:
        return "verifier calls only (the verdicts carry no cost fields)"
    return f"mixed: {full} of {n} verdicts carry all model calls, the rest the verifier's only"


def classification(verdicts: Iterable[Verdict]) -> dict:
    """`classify` of labelled verdicts in memory."""
    return classify(of_verdicts(verdicts)[0])


def evaluate(verdicts: Iterable[Verdict]) -> dict:
    """`by_platform` of verdicts in memory."""
    rows, table = of_verdicts(verdicts)
    return by_platform(rows, table.platforms)


def efficiency(verdicts: Iterable[Verdict], run_summary: dict | None = None) -> dict:
    """`costs` of verdicts in memory."""
    return costs(of_verdicts(verdicts)[0], run_summary)

