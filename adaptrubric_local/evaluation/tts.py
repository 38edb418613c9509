"""Reward-guided test-time scaling (paper §5.3, Appendix F): selecting one of N candidates per task.

Candidates are grouped by task (the data's task_id, else its instruction), sorted by id and shuffled
with a generator of the task's own seeded with the fixed seed (42), so a task's order is the same for
every verifier and whatever other tasks there are. For each budget N (a task with fewer candidates
uses all of them):
- EarlyStop@N: the first candidate predicted successful, else the last one scanned;
- BestOfN@N: the highest score, ties to the last candidate; `bestofn_soft` breaks score ties with
  p_success (calibrated when the verdicts carry it) before position;
- Random@N: the expected success of a uniform pick from the prefix (exact, not a sample);
- Oracle@N: success if any candidate in the prefix succeeded.
Pool composition follows Table 12; its headroom is Oracle@N minus Random@1 (the expected success of one
uniformly chosen trial per task). Unparsed, error and missing candidates are never "predicted success":
they rank below a parsed 0 and are counted; when no candidate was scored, no gains over Random are
given. Success rates are percentages over tasks, tallied one task at a time (`Tally`) from a verdict
table's rows (`table_curves`) or verdicts in memory (`curves`). Knows nothing about models or files.
"""
from __future__ import annotations

import random
from collections import defaultdict, namedtuple
from collections.abc import Iterable, Iterator
from fractions import Fraction

import numpy as np

from ..types import Verdict
from . import metrics
from .verdict_table import NO_TASK, STATUSES, Rows, Table, VerdictTable, of_verdicts

SEED = 42
PROTOCOLS = ("earlystop", "bestofn", "bestofn_soft", "random", "oracle")
WINS = ("earlystop", "bestofn", "bestofn_soft", "oracle")  # the protocols that pick a candidate
NO_TASKS = "no labelled verdicts with a task_id: test-time scaling needs candidates grouped by task"


def shuffled(cands: list, seed: int | None) -> list:
    """A task's candidates sorted by id, then shuffled by a generator of their own seeded with `seed` (so
    independent of the other tasks); seed None keeps them sorted."""
    cands = sorted(cands, key=lambda v: str(v.id))
    if seed is not None:
        random.Random(seed).shuffle(cands)
    return cands


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
        p = probability(v) if soft else None
        return (_rank(v), p if p is not None else (-1.0 if soft else 0.0), pos)

    return max(enumerate(prefix), key=key)[1]


def probability(v: Verdict) -> float | None:
    """The probability `bestofn_soft` (and review_order's `uncertain`) reads: p_success_calibrated in a
    calibrated verdict file (calibration is increasing, so the picks are the same), else p_success."""
    p = v.p_success_calibrated if v.p_success_calibrated is not None else v.p_success
    return None if p is None else float(p)


def oracle(cands: list[Verdict], n: int) -> int:
    """1 if any of the first n candidates succeeded."""
    return int(any(v.label == 1 for v in cands[:n]))


def curves(verdicts: Iterable[Verdict], max_n: int | None = None, seed: int | None = SEED) -> dict:
    """SR@N for N = 1..max_n for every protocol, gains over Random, and the pool composition, of verdicts in
    memory (their own labels and task ids)."""
    most, tasks = task_lists(*of_verdicts(verdicts, candidates=True), seed)
    return over_tasks(tasks, max_n or most)


def over_tasks(tasks: Iterable[list], max_n: int) -> dict:
    """`curves`' result from the tasks' candidate lists, each in its shuffled order, read once each; no
    task is an error."""
    tally = Tally(max_n)
    for cands in tasks:
        tally.add(cands)
    if not tally.tasks:
        raise ValueError(NO_TASKS)
    out: dict = {k: tally.curve(k) for k in PROTOCOLS}
    pool = out["pool"] = tally.pool()
    out["informative"] = pool["scored"] > 0
    out["gain_over_random"] = {k: {n: out[k][n] - out["random"][n] for n in out[k]} for k in WINS} \
        if out["informative"] else None
    if not out["informative"]:
        missing = f", {pool['missing']} missing" if pool["missing"] else ""
        out["note"] = (f"no candidate was scored ({pool['unparsed']} unparsed, {pool['errors']} errors{missing}): "
                       "EarlyStop and BestOfN only reflect candidate order, so no gains over Random are reported")
    return out


def _exact(sums: dict[int, int]) -> float:
    """The sum over prefix lengths k of successes / k, rounded once."""
    return float(sum((Fraction(s, k) for k, s in sums.items()), Fraction(0)))


class Tally:
    """The protocols' successes per N and the pool's counts, added one task at a time."""

    def __init__(self, max_n: int):
        self.max_n = max_n
        self.wins = {k: [0] * (max_n + 1) for k in WINS}
        self.random = [defaultdict(int) for _ in range(max_n + 1)]  # N -> {prefix length: successes in it}
        self.random1: dict[int, int] = defaultdict(int)  # trials -> successes of the tasks with that many
        self.tasks = self.all_fail = self.all_pass = self.trials = 0
        self.status = {"ok": 0, "unparsed": 0, "error": 0, "missing": 0}

    def add(self, cands: list) -> None:
        """One task's candidates, in its order."""
        labels = [v.label for v in cands]
        for n in range(1, self.max_n + 1):
            for k, won in (("earlystop", earlystop(cands, n).label), ("bestofn", bestofn(cands, n).label),
                           ("bestofn_soft", bestofn(cands, n, soft=True).label), ("oracle", oracle(cands, n))):
                self.wins[k][n] += won
            self.random[n][min(n, len(cands))] += sum(labels[:n])
        won = sum(labels)
        self.tasks += 1
        self.all_fail += won == 0
        self.all_pass += won == len(cands)
        self.trials += len(cands)
        self.random1[len(cands)] += won
        self.status.update({k: n + sum(v.status == k for v in cands) for k, n in self.status.items()})

    def curve(self, protocol: str) -> dict[int, float]:
        """SR@N (percent of tasks) for N = 1..max_n."""
        won = (lambda n: _exact(self.random[n])) if protocol == "random" else self.wins[protocol].__getitem__
        return {n: 100.0 * won(n) / self.tasks for n in range(1, self.max_n + 1)}

    def pool(self) -> dict:
        t = self.tasks
        mixed = t - self.all_fail - self.all_pass
        oracle_max = 100.0 * self.wins["oracle"][self.max_n] / t
        random1 = 100.0 * _exact(self.random1) / t  # one uniform trial per task
        return {"tasks": t, "trials_per_task": {"min": min(self.random1), "max": max(self.random1)},
                "all_fail": self.all_fail, "all_pass": self.all_pass, "mixed": mixed,
                "all_fail_pct": 100.0 * self.all_fail / t, "all_pass_pct": 100.0 * self.all_pass / t,
                "mixed_pct": 100.0 * mixed / t, "trial_sr": 100.0 * sum(self.random1.values()) / self.trials,
                "oracle_at_max": oracle_max, "random_at_1_expected": random1, "headroom": oracle_max - random1,
                "scored": self.status["ok"], "unparsed": self.status["unparsed"], "errors": self.status["error"],
                "missing": self.status["missing"]}


# one candidate as the protocols read it (the Verdict fields above), from a row of a verdict table
Candidate = namedtuple("Candidate", "id label status score p_success p_success_calibrated")


def task_lists(rows: Rows, table: VerdictTable, seed: int | None = SEED) -> tuple[int, Iterator[list[Candidate]]]:
    """(the most candidates of a task, each task's labelled candidates in their `shuffled` order, one task
    at a time) from the rows of a table with `candidates`."""
    keep = np.flatnonzero((rows["label"] >= 0) & (rows["task"] != NO_TASK))
    order = keep[np.argsort(rows["task"][keep], kind="stable")]
    _, starts, sizes = np.unique(rows["task"][order], return_index=True, return_counts=True)  # sorted: runs

    def one(r: int) -> Candidate:
        p, calibrated, score = rows["p_success"][r], rows["p_calibrated"][r], int(rows["score"][r])
        return Candidate(table.name(rows, r), int(rows["label"][r]), STATUSES[rows["status"][r]],
                         None if score < 0 else score, None if np.isnan(p) else float(p),
                         None if np.isnan(calibrated) else float(calibrated))

    return int(sizes.max(initial=0)), (shuffled([one(int(r)) for r in order[a:a + k]], seed)
                                       for a, k in zip(starts.tolist(), sizes.tolist()))


def table_curves(t: Table, max_n: int | None = None, seed: int | None = SEED) -> dict:
    """tts.json's content less its run record, from a verdict table read with `candidates`."""
    most, tasks = task_lists(t.rows, t.table, seed)
    res = over_tasks(tasks, max_n or most)
    labelled = t.rows["label"] >= 0
    res["classification"] = metrics.classify({k: a[labelled] for k, a in t.rows.items()})
    res["coverage"] = t.coverage.to_dict()
    return res
