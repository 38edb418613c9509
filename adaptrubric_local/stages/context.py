"""The trajectory context selector sigma(tau, c): at most M screenshots for the verifier (paper §4.3).

Always keeps the first and the final frame, then frames around high-signal actions, with
family-aware priorities; chronological order is kept. With a fingerprint (not in the paper), a run of
consecutive near-identical frames is shown once and the budget refilled from the next candidates.
Image access is limited to that optional callable; knows nothing about prompts or models.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from ..types import Trajectory
from .actions import PRIORITY, action_kind, is_high_signal

DEFAULT_BUDGET = 10
Fingerprint = Callable[[str], object]


@dataclass
class Selection:
    """The chosen step indices (chronological), and why each was kept."""

    indices: list[int]
    reasons: dict[int, str] = field(default_factory=dict)
    dropped_duplicates: list[int] = field(default_factory=list)  # candidates shown by a same-screen neighbour

    def paths(self, traj: Trajectory) -> list[str]:
        """Screenshot paths of the selected steps."""
        return [traj.steps[i].screenshot for i in self.indices]


def _family_bonus(family: str, kinds: list[str], frames: list[int]) -> dict[int, tuple[float, str]]:
    """Extra score for frames a family's rubric needs as evidence."""
    bonus: dict[int, tuple[float, str]] = {}
    pos = {f: n for n, f in enumerate(frames)}

    def add(i: int | None, b: float, why: str) -> None:  # None (no such frame): nothing
        if i in pos and b > bonus.get(i, (0, ""))[0]:
            bonus[i] = (b, why)

    if family == "info_query":
        for i, k in enumerate(kinds):
            if k in ("read", "answer"):
                add(i, 4, "answer read here")
                add(max((f for f in frames if f < i), default=None), 3.5, "answer read here")
    elif family == "transfer":
        t = [i for i, k in enumerate(kinds) if k in ("transfer", "type", "submit")]
        if t:
            add(t[0], 4, "source side")
            add(t[-1], 4, "sink side")
            add(next((f for f in frames if f > t[-1]), None), 4, "sink side")
    elif family == "state_navigation":
        for f in frames[-3:]:
            add(f, 3, "final-state anchor")
    elif family == "composite_workflow":
        n = len(frames)
        for q in (0.25, 0.5, 0.75):
            add(frames[min(n - 1, int(q * n))], 2, "sub-goal coverage")
    elif family in ("communication", "delete_cleanup", "create_modify"):
        for i, k in enumerate(kinds):
            if k in ("submit", "delete", "type"):
                add(next((f for f in frames if f > i), None), 2.5, f"result of {k}")
    return bonus


def _score_frames(traj: Trajectory, family: str, frames: list[int]) -> dict[int, tuple[float, str]]:
    kinds = [action_kind(s) for s in traj.steps]
    scores: dict[int, tuple[float, str]] = {}

    def put(i: int | None, s: float, why: str) -> None:  # None (no such frame): nothing
        if i in frame_set and s > scores.get(i, (-1e9, ""))[0]:
            scores[i] = (s, why)

    frame_set = set(frames)
    for i, k in enumerate(kinds):
        if is_high_signal(k):
            put(i, PRIORITY[k], f"before {k}")
            put(next((f for f in frames if f > i), None), PRIORITY[k] + 0.5, f"after {k}")
    for i, (b, why) in _family_bonus(family, kinds, frames).items():
        scores[i] = (scores.get(i, (0.0, ""))[0] + b, why)  # the rubric's reason outranks the action's
    return scores


def select_context(traj: Trajectory, family: str = "general", budget: int = DEFAULT_BUDGET,
                   fingerprint: Fingerprint | None = None, near_dup: Callable | None = None) -> Selection:
    """Pick at most `budget` screenshot-bearing steps; first and final frame always included. With a
    `fingerprint`, a run of consecutive near-identical frames is shown once, by its last (settled)
    frame, or by the first frame for the run the trajectory opens with."""
    if budget < 2:
        raise ValueError(f"budget must be at least 2 (first and final frame), got {budget}")
    frames = [i for i, s in enumerate(traj.steps) if s.screenshot]
    if not frames:
        raise ValueError(f"trajectory {traj.id}: no screenshots to select from")
    first, last = frames[0], frames[-1]
    scores = _score_frames(traj, family, frames)
    # later frames break ties: outcome evidence accumulates toward the end
    ranked = sorted((f for f in frames if f not in (first, last)),
                    key=lambda f: (scores.get(f, (0.0,))[0], f), reverse=True)
    reasons, dropped = {first: "first frame", last: "final frame"}, []  # the chosen frames, and why
    runs = _Runs(traj, frames, fingerprint, near_dup)
    for f in ranked:
        if len(reasons) >= budget:
            break
        rep = runs.representative(f)
        if rep != f:
            dropped.append(f)
        if rep in reasons:
            continue
        why = scores.get(f, (0.0, "coverage"))[1] or "coverage"
        reasons[rep] = why if rep == f else f"{why} (settled frame of a repeated screen)"
    indices = sorted(reasons)
    return Selection(indices=indices, reasons={i: reasons[i] for i in indices}, dropped_duplicates=sorted(dropped))


class _Runs:
    """Runs of consecutive near-identical frames, found lazily so only the frames selection looks
    at (and their neighbours) are fingerprinted. Without a fingerprint every frame is its own run."""

    def __init__(self, traj: Trajectory, frames: list[int], fingerprint: Fingerprint | None,
                 near_dup: Callable | None):
        self.frames, self.fingerprint = frames, fingerprint
        self.pos = {f: n for n, f in enumerate(frames)}
        if fingerprint is not None:
            fp, paths = cache(fingerprint), [traj.steps[f].screenshot for f in frames]
            # whether frame positions n and n+1 show the same screen
            self._same_as_next = cache(lambda n: (near_dup or operator.eq)(fp(paths[n]), fp(paths[n + 1])))
            self.first_run_end = self._walk(0, +1)  # frames shown by the first frame
            self.last_run_start = self._walk(len(frames) - 1, -1)  # frames shown by the final frame

    def _walk(self, n: int, step: int) -> int:
        """The last position reached from n moving by `step` through same-screen neighbours."""
        while 0 <= n + step < len(self.frames) and self._same_as_next(min(n, n + step)):
            n += step
        return n

    def representative(self, f: int) -> int:
        """The frame that shows f's screen: the first frame, the final frame, or the run's last frame."""
        if self.fingerprint is None:
            return f
        n = self.pos[f]
        if n <= self.first_run_end and self.first_run_end < self.last_run_start:
            return self.frames[0]
        if n >= self.last_run_start:
            return self.frames[-1]
        return self.frames[self._walk(n, +1)]


def thumbnail_fingerprint(path: str, size: int = 32):
    """A small grayscale thumbnail (bytes, box-averaged so a small local change such as a typed
    word still moves its cell) for near-duplicate checks."""
    from PIL import Image

    with Image.open(path) as im:
        return im.convert("L").resize((size, size), Image.BOX).tobytes()


def thumbnails_close(a, b, tol: int = 6) -> bool:
    """Whether no thumbnail cell differs by more than `tol` grey levels: a change anywhere on the
    screen (a typed word, a toggled switch) keeps both frames."""
    return len(a) == len(b) and max((abs(x - y) for x, y in zip(a, b)), default=0) <= tol
