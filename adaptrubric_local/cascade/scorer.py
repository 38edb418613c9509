"""The student answers, the judge checks: a scorer that runs the student's pipeline over every
trajectory and sends to a judge's pipeline (the same method: router, cues, fused prompt, selected
screenshots) the ones the student is unsure of, plus a seeded random sample (the spot checks).

A verdict goes to the judge when it is an error or unparsed, says EVIDENCE_SUFFICIENT: no, or has
p_success inside the band; and, independently of all that, when the id is drawn for a spot check.
The judge's answer becomes the line's verdict (`decided_by: judge`) with the student's beside it
(`student`); a judge that fails (an error, a timeout, an unparsable answer, an exception) leaves the
student's verdict standing (`decided_by: student`, `judge_error` saying why), so no line is lost.
Judge calls run on a worker thread while the student goes on with its next batches; a judge that
stops answering (health.py) is not asked until it answers again, its lines failing at once. Knows nothing
about files, flags or summaries.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from ..pipeline import AdaptRubric
from ..types import Trajectory, Verdict
from .health import JudgeHealth

COMPACT = ("status", "score", "p_success", "evidence_sufficient", "model", "parse_error", "error", "cost_calls",
           "cost_tokens")


@dataclass(frozen=True)
class CascadeVerdict(Verdict):
    """A verdict line of a cascade: who decided, why it went to the judge, and both verdicts."""

    decided_by: str = "student"  # "student" | "judge"
    escalated: list[str] = field(default_factory=list)  # why it went to the judge; [] when none
    student: dict[str, Any] | None = None  # the student's verdict, on a line the judge was asked about
    judge: dict[str, Any] | None = None  # the judge's verdict (or its failure), when it was asked
    judge_error: str | None = None  # why the judge gave no verdict: the student's stands


def compact(v: Verdict) -> dict[str, Any]:
    """The fields of a verdict kept beside the other's on a cascade line."""
    return {k: getattr(v, k) for k in COMPACT}


def spot_drawn(seed: int, traj_id: str, fraction: float) -> bool:
    """Whether `traj_id` is in the spot-check sample: a uniform draw from a hash of (seed, id), so it
    does not depend on the verdict and a resumed run draws the same ids."""
    u = int.from_bytes(hashlib.sha256(f"{seed}\0{traj_id}".encode()).digest()[:8], "big") / 2 ** 64
    return fraction > 0 and u < fraction


def escalation(v: Verdict, band: tuple[float, float], spot_check: float = 0.0, seed: int = 0) -> list[str]:
    """Why the student's verdict `v` goes to the judge (error, unparsed, evidence_insufficient, band,
    spot_check, in that order); [] when it stands."""
    why = []
    if v.status in ("error", "unparsed"):
        why.append(v.status)
    else:
        if v.evidence_sufficient is False:
            why.append("evidence_insufficient")
        if v.p_success is not None and band[0] <= v.p_success <= band[1]:
            why.append("band")
    if spot_drawn(seed, str(v.id), spot_check):
        why.append("spot_check")
    return why


def merge(s: Verdict, why: list[str], j: Verdict | None = None, failure: str | None = None) -> CascadeVerdict:
    """The line for the student's verdict `s`: as it stands (`why` empty), the judge's `j` (answered),
    or the student's with the judge's failure (`failure`, or `j` that is not ok)."""
    if not why:
        return CascadeVerdict(**asdict(s))
    answered = j is not None and j.status == "ok" and failure is None
    if failure is None and not answered:
        failure = (f"unparsed: {j.parse_error or 'no verdict block'}" if j.status == "unparsed"
                   else f"error: {j.error}")
    d = asdict(j if answered else s)
    if j is not None:
        d.update(cost_calls=s.cost_calls + j.cost_calls, cost_tokens=s.cost_tokens + j.cost_tokens)
    return CascadeVerdict(**d, decided_by="judge" if answered else "student", escalated=list(why), student=compact(s),
                          judge=compact(j) if j is not None else None, judge_error=failure)


def not_answering(why: str) -> str:
    """The `judge_error` of a line whose judge had stopped answering."""
    return f"error: the judge is not answering ({why})"


class Cascade:
    """A Scorer (scoring.score_with) made of a student pipeline and a judge pipeline."""

    def __init__(self, student: AdaptRubric, judge: AdaptRubric, band: tuple[float, float], spot_check: float = 0.0,
                 seed: int = 0, max_waiting: int | None = None, health: JudgeHealth | None = None):
        self.student, self.judge, self.health = student, judge, health
        self.band, self.spot_check, self.seed = band, spot_check, seed
        # trajectories sent to the judge and not yet answered beyond which the student waits for the oldest
        # call (a judge slower than the student would otherwise hold more and more of the data)
        self.max_waiting = max_waiting or 4 * student.config.trajectories_per_batch

    @property
    def on_stage(self):
        return self.student.on_stage

    @on_stage.setter
    def on_stage(self, fn) -> None:
        self.student.on_stage = fn

    def ask_judge(self, items: list[tuple[Trajectory, Verdict, list[str]]]) -> list[CascadeVerdict]:
        """The lines for student verdicts sent to the judge; never raises (a failed call is each
        line's `judge_error`); a judge that is not answering (`health`) is not asked."""
        health = self.health
        if health is not None and health.down:
            return [merge(s, why, failure=not_answering(health.down)) for _, s, why in items]
        if health is not None:
            health.calling(+1)
        try:
            answers = {str(j.id): j for j in self.judge.score([t for t, _, _ in items])}
        except Exception as exc:  # the judge's engine crashed or the server went away mid-call
            return [merge(s, why, failure=f"error: {type(exc).__name__}: {exc}") for _, s, why in items]
        finally:
            if health is not None:
                health.calling(-1)
        cut = not_answering(health.down) if health is not None and health.down else None  # cut off mid-call
        lines = []
        for t, s, why in items:
            j = answers.get(str(t.id))
            if cut is not None and (j is None or j.status != "ok"):
                lines.append(merge(s, why, failure=cut))
            else:
                lines.append(merge(s, why, j, None if j is not None else "error: no judge verdict"))
        return lines

    def iter_ready(self, trajs: Iterable[Trajectory]) -> Iterator[list[CascadeVerdict]]:
        """Lines as they become ready: a student batch's confident verdicts at once, the escalated ones
        when the judge answers (judge calls overlap the student's next batches). `trajs` is taken as the
        student asks for it; a trajectory is held only until its line is ready (in the student's batch,
        then in the judge's call), so memory grows with the batches in flight, not the data."""
        held: dict[str, Trajectory] = {}  # taken by the student, its verdict not yet out

        def taken() -> Iterator[Trajectory]:
            for t in trajs:
                held[str(t.id)] = t
                yield t

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge")
        pending: list[tuple[Future, int]] = []  # judge calls in order, with how many trajectories each holds
        try:
            for ready in self.student.iter_ready(taken()):
                now, sent = [], []
                for v in ready:
                    why = escalation(v, self.band, self.spot_check, self.seed)
                    t = held.pop(str(v.id), None)
                    if why and t is not None:
                        sent.append((t, v, why))
                    else:
                        now.append(merge(v, []))
                if sent:
                    pending.append((pool.submit(self.ask_judge, sent), len(sent)))
                waiting = sum(k for _, k in pending)
                for f, k in list(pending):
                    if f.done() or waiting > self.max_waiting:  # the judge is behind: wait for its oldest calls
                        pending.remove((f, k))
                        waiting -= k
                        now += f.result()
                if now:
                    yield now
            while pending:
                yield pending.pop(0)[0].result()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def iter_score(self, trajs: Iterable[Trajectory]) -> Iterator[CascadeVerdict]:
        for ready in self.iter_ready(trajs):
            yield from ready

    def rejudge(self, lines: list[dict], trajs: dict[str, Trajectory]) -> list[CascadeVerdict]:
        """Ask the judge again about lines whose judge failed (`--resume`), the student's verdicts kept."""
        # a line whose judge failed holds the student's verdict in its own fields
        items = [(trajs[str(d["id"])], Verdict.from_dict(d), list(d.get("escalated") or ["error"])) for d in lines
                 if str(d["id"]) in trajs]
        return self.ask_judge(items) if items else []

    def summary(self) -> dict:
        return {**self.student.summary(), "judge": self.judge.summary()}
