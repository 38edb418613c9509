"""Fitting the escalation band: from trajectories scored by both the student and the judge, the band
[LO, HI] of student p_success that sends the fewest trajectories to the judge while the cascade's
agreement with judge-only scoring stays at or above a target.

A trajectory always goes to the judge when the student's verdict is not ok or says
EVIDENCE_SUFFICIENT: no; one the judge decides agrees with judge-only scoring by construction, one
the student decides agrees when its score is the judge's. The search is over bands whose ends are
the observed p_success values (and 0, 1): least judge share first, then the narrowest. The fit is
only as good as its sample: it should be a random sample of the data (all of it, or spot checks),
never the lines a band sent. Knows nothing about files or flags.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from .config import BAND_KIND


@dataclass
class Pair:
    """One trajectory scored by both: the student's verdict fields and the judge's score."""

    status: str
    score: int | None
    p_success: float | None
    evidence_sufficient: bool | None
    judge_score: int


def always_sent(p: Pair) -> bool:
    """Whether the cascade sends it to the judge whatever the band."""
    return p.status != "ok" or p.evidence_sufficient is False or p.p_success is None


def fit_band(pairs: list[Pair], target: float, max_share: float = 1.0, candidates: int = 200) -> dict:
    """The band file's content: the fitted band, its agreement and judge share on `pairs`, whether
    the target was met (`met`) and, when not, why (`why_not`)."""
    if not pairs:
        raise ValueError("no trajectory was scored by both the student and the judge: nothing to fit on")
    n = len(pairs)
    fixed = sum(always_sent(p) for p in pairs)
    rest = sorted((p.p_success, p.score != p.judge_score) for p in pairs if not always_sent(p))
    ps = [p for p, _ in rest]
    wrong = [0]
    for _, w in rest:
        wrong.append(wrong[-1] + w)
    ends = sorted(set([0.0, 1.0, *_thin(ps, candidates)]))
    best = None
    for i, lo in enumerate(ends):
        a = bisect.bisect_left(ps, lo)  # p < lo stays with the student
        for hi in ends[i:]:
            b = bisect.bisect_right(ps, hi)  # p > hi stays with the student
            agreement = 1 - (wrong[a] + wrong[-1] - wrong[b]) / n
            share = (fixed + b - a) / n
            key = (share, hi - lo)
            if agreement >= target and share <= max_share + 1e-12 and (best is None or key < best[0]):
                best = (key, lo, hi, agreement, share)
    out = {"kind": BAND_KIND, "target_agreement": target, "max_judge_share": max_share, "n": n,
           "always_sent_share": fixed / n, "student_only_agreement": 1 - (wrong[-1] + _fixed_wrong(pairs)) / n}
    if best is not None:
        _, lo, hi, agreement, share = best
        return {**out, "band": [lo, hi], "agreement": agreement, "judge_share": share, "met": True}
    # the target cannot be met within max_share: report the band that comes closest at that share
    top = max(((1 - (wrong[bisect.bisect_left(ps, lo)] + wrong[-1] - wrong[bisect.bisect_right(ps, hi)]) / n,
                -(hi - lo), lo, hi) for i, lo in enumerate(ends) for hi in ends[i:]
               if (fixed + bisect.bisect_right(ps, hi) - bisect.bisect_left(ps, lo)) / n <= max_share + 1e-12),
              default=None)
    if top is None:
        why = (f"{fixed} of {n} trajectories ({fixed / n:.0%}) go to the judge whatever the band (unparsed, error, "
               f"EVIDENCE_SUFFICIENT: no or no p_success), more than --max-judge-share {max_share:g}")
        return {**out, "band": [0.5, 0.5], "agreement": None, "judge_share": None, "met": False, "why_not": why}
    agreement, _, lo, hi = top
    share = (fixed + bisect.bisect_right(ps, hi) - bisect.bisect_left(ps, lo)) / n
    why = (f"agreement {target:g} with judge-only scoring needs more than --max-judge-share {max_share:g} of the "
           f"trajectories on this data; the best band within it, [{lo:g}, {hi:g}], agrees {agreement:.3f} "
           f"sending {share:.0%}")
    return {**out, "band": [lo, hi], "agreement": agreement, "judge_share": share, "met": False, "why_not": why}


def _fixed_wrong(pairs: list[Pair]) -> int:
    """Disagreements among the always-sent pairs if the student decided them (for student-only agreement)."""
    return sum(p.score != p.judge_score for p in pairs if always_sent(p))


def _thin(values: list[float], k: int) -> list[float]:
    """At most about `k` of the sorted distinct `values`, evenly spaced by rank."""
    distinct = sorted(set(values))
    if len(distinct) <= k:
        return distinct
    step = len(distinct) / k
    return [distinct[int(i * step)] for i in range(k)] + [distinct[-1]]
