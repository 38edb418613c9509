"""A data set read as a stream with labels files applied to each trajectory as it passes, or a loaded
data set labelled in place the same way (`apply_labels`): the one place labels files are put on.

The labels files are read whole, before the data; the data's ids come from the stream's first pass, so
an id the data does not hold is an error raised before any trajectory is parsed. The counts (`applied`)
are complete once the stream has been read through. Knows nothing about verdicts, metrics or commands.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from .formats.base import DataError, LoadResult
from .formats.stream import Item, LoadedStream, TrajectoryStream, stream_trajectories
from .labels import AppliedLabels, LabelsFile, check_ids, merged_labels, not_loaded_warning, read_labels
from .types import Trajectory


class LabelledStream:
    """The records of `data` (`items`, in data order) with the labels of `files` on its trajectories;
    `bad`, `first_bad` and `records` once read through."""

    def __init__(self, data: str | Path, files: Iterable[str | Path | LabelsFile] = (), fmt: str = "auto",
                 check_images: bool = False, image_roots: Iterable[str | os.PathLike] = (),
                 stream: TrajectoryStream | LoadedStream | None = None):
        self.data = data
        self.files = [f if isinstance(f, LabelsFile) else read_labels(f) for f in files]  # before the data
        self.stream = stream if stream is not None else \
            stream_trajectories(data, fmt=fmt, check_images=check_images, image_roots=image_roots)
        self.merged = merged_labels(self.files)
        check_ids(self.files, self.stream.ids.__contains__, str(data))
        self.before: dict[str, int | None] = {}  # a labelled id -> the label the data gave it
        self.bad, self.first_bad = 0, None

    @property
    def records(self) -> int:
        """The data's records, bad ones included (from the first pass)."""
        return self.stream.records

    def repeated(self, i: str | None) -> bool:
        """As the stream's `repeated`."""
        return self.stream.repeated(i)

    def sources(self) -> set[Path]:
        """The files the data's trajectories are read from, resolved."""
        if isinstance(self.stream, TrajectoryStream):
            return {Path(f).resolve() for f in self.stream.files}
        return {Path(t.source).resolve() for t in self.stream.loaded.trajectories if t.source}

    def items(self) -> Iterator[tuple[int, Item]]:
        """(position, Trajectory with its label as the labels files make it, or DataError), in data order."""
        self.before.clear()
        self.bad, self.first_bad = 0, None
        for position, x in self.stream.items():
            if isinstance(x, Trajectory):
                if x.id in self.merged:
                    self.before[x.id] = x.label
                    if self.merged[x.id] is not None:
                        x.label = self.merged[x.id]
            elif isinstance(x, DataError):
                self.bad += 1
                self.first_bad = self.first_bad or x
            yield position, x

    def applied(self) -> AppliedLabels:
        """What the labels files did to the trajectories read so far, in the merged files' order."""
        out = AppliedLabels(files=[f.provenance for f in self.files])
        for i, label in self.merged.items():
            if i not in self.before:
                out.not_loaded.append(i)
            else:
                out.count(self.before[i], label)
        return out

    def warning(self) -> str | None:
        """`load_labelled`'s warning when records did not load (the data gives them no label)."""
        return not_loaded_warning(self.bad, self.records, self.first_bad, self.data) if self.bad else None


def apply_labels(loaded: LoadResult, paths: Iterable[str | Path], data_name: str = "the data") -> AppliedLabels:
    """Put the labels of `paths` (in order; a later file wins per id) on `loaded.trajectories`, in place;
    returns what was done. An id in a file that the data does not hold is a LabelsError naming the file,
    line and id."""
    src = LabelledStream(data_name, paths, stream=LoadedStream(loaded))
    for _ in src.items():
        pass
    return src.applied()
