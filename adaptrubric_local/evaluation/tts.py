"""Reward-guided test-time scaling (paper §5.3, Appendix F): selecting one of N candidates per task.

Candidates are grouped by `task_id` (the harness uses the instruction when the data has none) and
sorted by id; each task is then shuffled with its own generator seeded with the fixed seed (42),
so a task's order is the same for every verifier and does not change when tasks are added or
removed. For each budget N (a task with fewer candidates uses all of them):
- EarlyStop@N: the first candidate predicted successful, else the last one scanned;
- BestOfN@N: the highest score, ties to the last candidate (binary scores: last predicted success,
  else the last candidate); `bestofn_soft` breaks score ties with p_success (calibrated when the
  verdicts carry it) before position;
- Random@N: the expected success of a uniform pick from the prefix (not a sample);
- Oracle@N: success if any candidate in the prefix succeeded.
Pool composition follows Table 12; its headroom is, as the caption defines it, Oracle@N minus
Random@1, with Random@1 the expected success of one uniformly chosen trial per task (the trial
success rate when every task has the same number of trials).
Unparsed and error verdicts, and candidates of the data set without a verdict ("missing"), are never
"predicted success": they rank below a parsed 0 and are counted; when no candidate was scored at all, the verifier carried no information and no gains
over Random are given. Success rates are percentages over tasks. Knows nothing about models or files.
"""
from __future__ import annotations

import random
from collections import defaultdict

from ..types import Verdict

SEED = 42


def groups(verdicts: list[Verdict], seed: int | None = SEED) -> dict[str, list[Verdict]]:
    """task_id -> labelled candidates in the fixed per-task shuffled order (tasks in sorted order);
    seed None keeps the candidates sorted by id."""
    by_task: dict[str, list[Verdict]] = defaultdict(list)
    for v in verdicts:
        if v.task_id is not None and v.label in (0, 1):
            by_task[str(v.task_id)].append(v)
    out = {}
    for task in sorted(by_task):
        cands = sorted(by_task[task], key=lambda v: str(v.id))
        if seed is not None:
            random.Random(seed).shuffle(cands)  # one generator per task: independent of the other tasks
        out[task] = cands
    return out


def _rank(v: Verdict) -> int:
    return v.score if v.status == "ok" and v.score is not None else -1


def earlystop(cands: list[Verdict], n: int) -> Verdict:
    """First predicted success among the first n, else the last scanned."""
    prefix = cands[:n]
    return next((v for v in prefix if _rank(v) == 1), prefix[-1])


def bestofn(cands: list[Verdict], n: int, soft: bool = False) -> Verdict:
    """Highest score among the first n; ties go to p_success (soft) and then to the last candidate."""
    prefix = cands[:n]

    def key(item):
        pos, v = item
        p = soft_probability(v) if soft else None
        return (_rank(v), p if p is not None else (-1.0 if soft else 0.0), pos)

    return max(enumerate(prefix), key=key)[1]


def soft_probability(v: Verdict):
    """The probability `bestofn_soft` ranks ties by: p_success_calibrated in a calibrated verdict file
    (calibration is increasing, so the picks are the same), else p_success."""
    p = getattr(v, "p_success_calibrated", None)
    return p if p is not None else v.p_success


def random_expected(cands: list[Verdict], n: int) -> float:
    """Expected success of a uniform pick from the first n."""
    prefix = cands[:n]
    return sum(v.label for v in prefix) / len(prefix)


def oracle(cands: list[Verdict], n: int) -> int:
    """1 if any of the first n candidates succeeded."""
    return int(any(v.label == 1 for v in cands[:n]))


def curves(verdicts: list[Verdict], max_n: int | None = None, seed: int | None = SEED) -> dict:
    """SR@N for N = 1..max_n for every protocol, gains over Random, and the pool composition."""
    tasks = groups(verdicts, seed)
    if not tasks:
        raise ValueError("no labelled verdicts with a task_id: test-time scaling needs candidates grouped by task")
    max_n = max_n or max(len(c) for c in tasks.values())
    out: dict = {k: {} for k in ("earlystop", "bestofn", "bestofn_soft", "random", "oracle")}
    t = len(tasks)
    for n in range(1, max_n + 1):
        out["earlystop"][n] = 100.0 * sum(earlystop(c, n).label for c in tasks.values()) / t
        out["bestofn"][n] = 100.0 * sum(bestofn(c, n).label for c in tasks.values()) / t
        out["bestofn_soft"][n] = 100.0 * sum(bestofn(c, n, soft=True).label for c in tasks.values()) / t
        out["random"][n] = 100.0 * sum(random_expected(c, n) for c in tasks.values()) / t
        out["oracle"][n] = 100.0 * sum(oracle(c, n) for c in tasks.values()) / t
    out["pool"] = pool(tasks, max_n)
    out["informative"] = out["pool"]["scored"] > 0
    if out["informative"]:
        out["gain_over_random"] = {k: {n: out[k][n] - out["random"][n] for n in out[k]}
                                   for k in ("earlystop", "bestofn", "bestofn_soft", "oracle")}
    else:
        out["gain_over_random"] = None
        missing = f", {out['pool']['missing']} missing" if out["pool"]["missing"] else ""
        out["note"] = (f"no candidate was scored ({out['pool']['unparsed']} unparsed, {out['pool']['errors']} errors"
                       f"{missing}): "
                       "EarlyStop and BestOfN only reflect candidate order, so no gains over Random are reported")
    return out


def pool(tasks: dict[str, list[Verdict]], max_n: int) -> dict:
    """Pool composition as in Table 12: all-fail / all-pass / mixed tasks, trial SR (pooled over
    trials), Oracle@max, Random@1 (expected, one uniform trial per task) and headroom = Oracle@max
    minus Random@1, as the table's caption defines it."""
    t = len(tasks)
    all_fail = sum(all(v.label == 0 for v in c) for c in tasks.values())
    all_pass = sum(all(v.label == 1 for v in c) for c in tasks.values())
    mixed = t - all_fail - all_pass
    labels = [v.label for c in tasks.values() for v in c]
    oracle_max = 100.0 * sum(oracle(c, max_n) for c in tasks.values()) / t
    random1 = 100.0 * sum(random_expected(c, len(c)) for c in tasks.values()) / t  # one uniform trial per task
    cands = [v for c in tasks.values() for v in c]
    return {
        "tasks": t,
        "trials_per_task": {"min": min(len(c) for c in tasks.values()), "max": max(len(c) for c in tasks.values())},
        "all_fail": all_fail, "all_pass": all_pass, "mixed": mixed,
        "all_fail_pct": 100.0 * all_fail / t, "all_pass_pct": 100.0 * all_pass / t, "mixed_pct": 100.0 * mixed / t,
        "trial_sr": 100.0 * sum(labels) / len(labels),
        "oracle_at_max": oracle_max, "random_at_1_expected": random1, "headroom": oracle_max - random1,
        "scored": sum(v.status == "ok" for v in cands),
        "unparsed": sum(v.status == "unparsed" for v in cands), "errors": sum(v.status == "error" for v in cands),
        "missing": sum(v.status == "missing" for v in cands),
    }
