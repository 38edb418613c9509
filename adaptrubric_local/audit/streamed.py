"""The audit's data as streams: the counterfactuals built and written one original at a time
(`write_streamed`, keeping the cost plan's counts and each original's label), and the originals with
their counterfactuals handed to `score_with` as one stream (`ChainedStream`), so an audit holds a batch
of trajectories, never the data set. Knows nothing about engines or the report's rules.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..formats import LoadResult, canonical
from ..formats.stream import Indexed, Keep, TrajectoryStream, as_stream, trajectories
from ..types import Trajectory
from .perturbations import DataSet, Perturbation, build_each

DATA_FILE = "counterfactuals.jsonl"


def setting_file(out: Path, name: str, kind: str = "verdicts") -> Path:
    """`verdicts.NAME.jsonl` / `counterfactuals.NAME.jsonl` of a setting perturbation."""
    return Path(out) / f"{kind}.{name}.jsonl"


class ChainedStream(Indexed):
    """Several streams (formats/stream.py) read one after another as one: positions run on across them;
    its methods are TrajectoryStream's."""

    def __init__(self, streams: list):
        self.streams = streams
        self.warnings = [w for s in streams for w in s.warnings]
        self._index(np.concatenate([s.order for s in streams]) if streams else np.zeros(0, dtype="S16"))

    def items(self, keep: Keep | None = None) -> Iterator[tuple[int, object]]:
        offset = 0
        for s in self.streams:
            shifted = None if keep is None else (lambda pos, own, o=offset: keep(pos + o, own))
            for pos, x in s.items(shifted):
                yield pos + offset, x
            offset += s.records

    def repeated(self, i: str | None) -> bool:
        return any(s.repeated(i) for s in self.streams)


def cf_stream(path: Path, roots: list):
    """A counterfactual file as a stream (screenshots allowed under the data's folders); an empty one
    when the file holds nothing."""
    return TrajectoryStream(path, image_roots=roots) if Path(path).stat().st_size else as_stream(LoadResult())


class Originals:
    """Per original (by its place among the sorted digests of the data's ids, `ids.index`): its label
    (-1: none) and whether it is a trajectory (not a bad record)."""

    def __init__(self, stream):
        self.ids = stream.ids
        self.label = np.full(len(self.ids), -1, dtype=np.int8)
        self.parsed = np.zeros(len(self.ids), dtype=bool)

    def add(self, t: Trajectory) -> None:
        k = self.ids.index(t.id)
        if k >= 0:
            self.parsed[k] = True
            self.label[k] = t.label if t.label in (0, 1) else -1


class CostCount:
    """The running counts `run.plan_of` reads: trajectories, counterfactuals per perturbation, the
    screenshots sent and the distinct instructions."""

    def __init__(self, perturbations: list[Perturbation], max_images: int):
        self.max_images, self.n = max_images, 0
        self.applied = {p.name: 0 for p in perturbations}
        self.shots_originals = self.shots_all = 0
        self.ins_originals: set[str] = set()
        self.ins_all: set[str] = set()

    def original(self, t: Trajectory) -> None:
        self.n += 1
        self.shots_originals += min(len(t.screenshots), self.max_images)
        self.shots_all += min(len(t.screenshots), self.max_images)
        self.ins_originals.add(t.instruction)
        self.ins_all.add(t.instruction)

    def counterfactual(self, name: str, c: Trajectory) -> None:
        self.applied[name] += 1
        self.shots_all += min(len(c.screenshots), self.max_images)
        self.ins_all.add(c.instruction)


def write_streamed(out: Path, perturbations: list[Perturbation], stream, max_images: int
                   ) -> tuple[dict[str, Path], CostCount, Originals]:
    """Write every counterfactual of the stream's trajectories (see run.py's docstring), one
    original at a time; (name -> its file, the cost counts, the originals' labels)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = DataSet(trajectories(stream))  # first pass: the instructions other-instruction draws on
    files = {p.name: out / DATA_FILE if p.engine_options is None else setting_file(out, p.name, "counterfactuals")
             for p in perturbations}
    cost, originals = CostCount(perturbations, max_images), Originals(stream)
    with contextlib.ExitStack() as stack:
        handles = {f: stack.enter_context(open(f, "w", encoding="utf-8"))
                   for f in {*files.values(), out / DATA_FILE}}
        for t in trajectories(stream):
            cost.original(t)
            originals.add(t)
            for p, c in build_each(perturbations, t, data, stream.ids.__contains__):
                handles[files[p.name]].write(canonical.record_line(c, files[p.name], reference=True))
                cost.counterfactual(p.name, c)
    return files, cost, originals
