"""The trajectory context selector sigma(tau, c): at most M screenshots for the verifier (paper §4.3).

Always keeps the first and the final frame; then frames around high-signal actions (text entry,
submit/confirm/send/save, answer, state-changing taps), with family-aware priorities (transfer keeps
source- and sink-side frames, info_query the frames where the answer was read, state_navigation the
final frames); near-duplicate neighbours are dropped and chronological order is kept. Image access
is limited to an optional fingerprint callable; knows nothing about prompts or models.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from .actions import PRIORITY, action_kind, is_high_signal
from .types import Trajectory

DEFAULT_BUDGET = 10
Fingerprint = Callable[[str], object]


@dataclass
class Selection:
    """The chosen step indices (chronological), and why each was kept."""

    indices: list[int]
    reasons: dict[int, str] = field(default_factory=dict)
    dropped_duplicates: list[int] = field(default_factory=list)

    def paths(self, traj: Trajectory) -> list[str]:
        """Screenshot paths of the selected steps."""
        return [traj.steps[i].screenshot for i in self.indices]


def _family_bonus(family: str, kinds: list[str], frames: list[int]) -> dict[int, tuple[float, str]]:
    """Extra score for frames a family's rubric needs as evidence."""
    bonus: dict[int, tuple[float, str]] = {}
    pos = {f: n for n, f in enumerate(frames)}

    def add(i: int, b: float, why: str) -> None:
        if i in pos and b > bonus.get(i, (0, ""))[0]:
            bonus[i] = (b, why)

    last = frames[-1]
    if family == "info_query":
        for i, k in enumerate(kinds):
            if k in ("read", "answer"):
                add(i, 4, "answer read here")
                prev = [f for f in frames if f < i]
                if prev:
                    add(prev[-1], 3.5, "answer read here")
    elif family == "transfer":
        t = [i for i, k in enumerate(kinds) if k in ("transfer", "type", "submit")]
        if t:
            add(t[0], 4, "source side")
            add(t[-1], 4, "sink side")
            after = [f for f in frames if f > t[-1]]
            if after:
                add(after[0], 4, "sink side")
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
                after = [f for f in frames if f > i]
                if after:
                    add(after[0], 2.5, f"result of {k}")
    add(last, 0, "final frame")
    return bonus


def _score_frames(traj: Trajectory, family: str, frames: list[int]) -> dict[int, tuple[float, str]]:
    kinds = [action_kind(s) for s in traj.steps]
    scores: dict[int, tuple[float, str]] = {}

    def put(i: int, s: float, why: str) -> None:
        if i in frame_set and s > scores.get(i, (-1e9, ""))[0]:
            scores[i] = (s, why)

    frame_set = set(frames)
    for i, k in enumerate(kinds):
        if is_high_signal(k):
            put(i, PRIORITY[k], f"before {k}")
            after = next((f for f in frames if f > i), None)
            if after is not None:
                put(after, PRIORITY[k] + 0.5, f"after {k}")
    for i, (b, why) in _family_bonus(family, kinds, frames).items():
        base = scores.get(i, (0.0, why))
        scores[i] = (base[0] + b, why if b >= 1 else base[1])
    return scores


def select_context(traj: Trajectory, family: str = "general", budget: int = DEFAULT_BUDGET,
                   fingerprint: Optional[Fingerprint] = None, near_dup: Optional[Callable] = None) -> Selection:
    """Pick at most `budget` screenshot-bearing steps; first and final frame always included."""
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
    reasons = {first: "first frame", last: "final frame"}
    chosen, dropped = {first, last}, []
    cache: dict[str, object] = {}

    def fp(i: int):
        p = traj.steps[i].screenshot
        if p not in cache:
            cache[p] = fingerprint(p)
        return cache[p]

    for f in ranked:
        if len(chosen) >= budget:
            break
        chosen.add(f)
        reasons[f] = scores.get(f, (0.0, "coverage"))[1] or "coverage"
    if fingerprint is not None:
        ordered = sorted(chosen)
        keep = [ordered[0]]
        for f in ordered[1:]:
            if not _is_dup(fp(keep[-1]), fp(f), near_dup):
                keep.append(f)
            elif keep[-1] == first and f != last:
                dropped.append(f)  # the first frame stays; its repeat goes
            elif keep[-1] == first:
                keep.append(f)  # first and final frame are both always kept
            else:
                dropped.append(keep.pop())  # of a run of repeats keep the later, settled frame
                keep.append(f)
        chosen = set(keep)
    indices = sorted(chosen)
    return Selection(indices=indices, reasons={i: reasons.get(i, "coverage") for i in indices},
                     dropped_duplicates=sorted(dropped))


def _is_dup(a, b, near_dup: Optional[Callable]) -> bool:
    return near_dup(a, b) if near_dup else a == b


def thumbnail_fingerprint(path: str, size: int = 32):
    """A small grayscale thumbnail (bytes, box-averaged so a small local change such as a typed
    word still moves its cell) for near-duplicate checks. This decode repeats the image pipeline's
    decode of the frames that get selected; sharing it would mean holding every candidate frame in
    memory until selection is done, so the pipeline runs these in a thread pool instead."""
    from PIL import Image

    with Image.open(path) as im:
        return im.convert("L").resize((size, size), Image.BOX).tobytes()


def thumbnails_close(a, b, tol: int = 6) -> bool:
    """Whether no thumbnail cell differs by more than `tol` grey levels: a change anywhere on the
    screen (a typed word, a toggled switch) keeps both frames."""
    return len(a) == len(b) and max((abs(x - y) for x, y in zip(a, b)), default=0) <= tol
