"""Fitting the escalation band: from trajectories scored by both the student and the judge, the band
[LO, HI] of student p_success that sends the fewest trajectories to the judge while the cascade's
agreement with judge-only scoring stays at or above a target (why each rule: docs/student-judge.md).

A trajectory always goes to the judge when the student's verdict is not ok or says
EVIDENCE_SUFFICIENT: no; one the judge decides agrees with judge-only scoring by construction, one
the student decides agrees when its score is the judge's. The search is over bands whose ends are
the observed p_success values (and 0, 1): least judge share first, then the narrowest. A band
qualifies when the lower end of the Wilson interval (`confidence`) of its agreement on the fit set,
spot checks (`spot_check`) counted, reaches the target; the band found is then widened to halfway
between its ends and the nearest p_success outside it. The fit should be on a random sample of the data,
never the lines a band sent. Knows nothing about files or flags.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from itertools import accumulate
from statistics import NormalDist

from ..audit.verdict import wilson
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


def fit_band(pairs: list[Pair], target: float, max_share: float = 1.0, candidates: int = 200,
             spot_check: float = 0.0, confidence: float = 0.95) -> dict:
    """The band file's content: the fitted band, its expected agreement on `pairs` with `spot_check` of
    the rest spot-checked (and that agreement's interval's lower end at `confidence`, 0: none) and its
    judge share, whether the target was met (`met`) and, when not, why (`why_not`); `tight_band` is
    the band before its ends were widened to the margin."""
    if not pairs:
        raise ValueError("no trajectory was scored by both the student and the judge: nothing to fit on")
    if not 0.0 <= confidence < 1.0:
        raise ValueError(f"confidence must be in [0, 1), got {confidence}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    n = len(pairs)
    fixed = sum(always_sent(p) for p in pairs)
    rest = sorted((p.p_success, p.score != p.judge_score) for p in pairs if not always_sent(p))
    ps = [p for p, _ in rest]
    wrong = list(accumulate((w for _, w in rest), initial=0))
    distinct = sorted(set(ps))
    if len(distinct) > candidates:  # at most about `candidates` of them, evenly spaced by rank
        step = len(distinct) / candidates
        distinct = [distinct[int(i * step)] for i in range(candidates)] + [distinct[-1]]
    ends = sorted({0.0, 1.0, *distinct})

    def figures(lo: float, hi: float) -> tuple[float, float, float]:
        """(agreement, its interval's lower end, judge share) of the band [lo, hi]: p < lo and p > hi stay
        with the student, but for the spot checks."""
        a, b = bisect.bisect_left(ps, lo), bisect.bisect_right(ps, hi)
        outside = len(ps) - (b - a)
        agreement = 1 - (1 - spot_check) * (wrong[a] + wrong[-1] - wrong[b]) / n
        return agreement, wilson(agreement * n, n, z)[0], (fixed + b - a + spot_check * outside) / n

    bands = [(lo, hi, *figures(lo, hi)) for i, lo in enumerate(ends) for hi in ends[i:]]
    within = [b for b in bands if b[4] <= max_share + 1e-12]
    met = [b for b in within if b[3] >= target - 1e-12]
    out = {"kind": BAND_KIND, "target_agreement": target, "confidence": confidence, "max_judge_share": max_share,
           "spot_check": spot_check, "n": n, "always_sent_share": fixed / n,
           "student_only_agreement": 1 - (wrong[-1] + sum(p.score != p.judge_score for p in pairs
                                                            if always_sent(p))) / n}

    def result(band: tuple, met: bool, **why) -> dict:
        lo, hi, agreement, lower, share = band
        return {**out, "band": _widened(ps, lo, hi), "tight_band": [lo, hi], "agreement": agreement,
                "agreement_lower": lower, "judge_share": share, "met": met, **why}

    if met:
        return result(min(met, key=lambda b: (b[4], b[1] - b[0])), True)
    if not within:
        why = (f"{fixed} of {n} trajectories ({fixed / n:.0%}) go to the judge whatever the band (unparsed, error, "
               f"EVIDENCE_SUFFICIENT: no or no p_success), more than --max-judge-share {max_share:g}")
        return {**out, "band": [0.5, 0.5], "agreement": None, "judge_share": None, "met": False, "why_not": why}
    # the target cannot be met within max_share: report the band that comes closest at that share
    closest = max(within, key=lambda b: (b[3], -(b[1] - b[0])))
    best = max(within, key=lambda b: (b[2], -b[4]))  # the highest agreement within the share
    needed = pairs_needed(best[2], target, z) if best[2] >= target - 1e-12 else None
    if needed is not None:  # the agreement is there; the interval is too wide: the sample is too small
        why = (f"{n} pairs are too few for the target {target:g} at {confidence:.0%} confidence: the band "
               f"[{best[0]:g}, {best[1]:g}] agrees {best[2]:.3f} on them sending {best[4]:.0%}, but the lower end "
               f"of its {confidence:.0%} interval is {best[3]:.3f}; at that agreement the target needs "
               f"{needed} pairs (score more trajectories with --spot-check, or lower --confidence)")
        return result(best, False, why_not=why, pairs_needed=needed)
    lo, hi, agreement, lower, share = closest
    sure = f" (the lower end of its {confidence:.0%} interval: {lower:.3f})" if confidence else ""
    why = (f"agreement {target:g} with judge-only scoring needs more than --max-judge-share {max_share:g} of the "
           f"trajectories on this data; the best band within it, [{lo:g}, {hi:g}], agrees {agreement:.3f}{sure} "
           f"sending {share:.0%}")
    return result(closest, False, why_not=why)


def pairs_needed(rate: float, target: float, z: float, most: int = 10 ** 7) -> int | None:
    """The fewest pairs at which agreement `rate` has the lower end of its Wilson interval (`z`) at or
    above `target`; None when no number up to `most` does (a rate at the target never gets there)."""
    def enough(m: int) -> bool:
        return wilson(rate * m, m, z)[0] >= target - 1e-12

    if rate <= target or not enough(most):
        return None
    return 1 + bisect.bisect_left(range(1, most + 1), True, key=enough)


def _widened(ps: list[float], lo: float, hi: float) -> list[float]:
    """[lo, hi] with each end moved halfway to the nearest of the sorted `ps` outside it (0 and 1 at
    most): the same values of `ps` inside. An empty band (lo == hi, no value in it) stays as it is."""
    a, b = bisect.bisect_left(ps, lo), bisect.bisect_right(ps, hi)
    if a == b:
        return [lo, hi]
    below = ps[a - 1] if a > 0 else None
    above = ps[b] if b < len(ps) else None
    return [(lo + below) / 2 if below is not None else 0.0, (hi + above) / 2 if above is not None else 1.0]
