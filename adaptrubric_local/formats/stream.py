"""Trajectory data read as a stream: records parsed one at a time as the caller asks for them, so
scoring a million-line data set holds one batch, not the data set. A first pass keeps only the
records' ids (formats/ids.py: 16 bytes each) for what needs the whole data set: the repeated-id check
(the second record with an id is an error naming the first's file, as `load_trajectories` says) and
the count of records. Every record has a position (its place in the data, bad records included), by
which `--shard I/N` picks every N-th record.

Canonical JSONL (a file or a folder of them) is streamed; the other formats are loaded whole by their
loaders and handed out the same way. Knows nothing about verdicts or scoring.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..types import Trajectory
from . import FORMATS, canonical, data_jsonl, detect_format, folder_hints, load_trajectories, split_format
from .base import DataError, LoadResult, Roots, check_image_roots, iter_json_lines, own_id
from .ids import IdBuilder, IdSet

Item = Trajectory | DataError
Keep = Callable[[int, str | None], bool]  # (position, the record's own id or None) -> parse it?


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (1-based): the records at positions index-1, index-1+count, ..."""

    index: int
    count: int

    def __post_init__(self):
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise ValueError(f"--shard I/N needs 1 <= I <= N, got {self.index}/{self.count}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """'2/4' -> Shard(2, 4); ValueError saying the form otherwise."""
        try:
            i, n = (int(x) for x in str(text).split("/"))
        except ValueError:
            raise ValueError(f"--shard takes I/N (this machine's shard I of N, e.g. 2/4), got {text!r}") from None
        return cls(i, n)

    def takes(self, position: int) -> bool:
        """Whether the record at `position` (0-based) is this shard's."""
        return position % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


class Indexed:
    """What a stream knows of its records before it reads them: each position's id digest (`order`,
    empty for a record without an id), their number and the set of their ids."""

    def _index(self, order: np.ndarray) -> None:
        self.order, self.records = order, len(order)
        self.ids: IdSet = IdSet(self.order[self.order != b""])  # a mask makes a copy, sorted in place

    def count(self, shard: Shard | None = None, done: np.ndarray | None = None) -> int:
        """How many records (of `shard`) have no id among the sorted digests `done`."""
        mine = self.order[shard.index - 1::shard.count] if shard else self.order
        if done is None or not len(done):
            return len(mine)
        return int(len(mine) - IdSet(done, presorted=True).has_keys(mine).sum())


class TrajectoryStream(Indexed):
    """A data set's records in order, parsed as they are asked for (`items`); `ids` and `records` from
    the first pass; `warnings` as `LoadResult.warnings`."""

    def __init__(self, path: str | Path, check_images: bool = True, image_roots: Roots = ()):
        self.path, self.check_images = Path(path), check_images
        self.image_roots = check_image_roots(image_roots)
        self.warnings: list[str] = []
        if self.path.is_dir():
            self.files = data_jsonl(self.path, self.warnings)
        else:
            canonical.refuse_not_data(self.path)
            self.files = [self.path]
        ids = IdBuilder()
        for _, record, x in self._read(self.warnings):  # a malformed line: under the id it names first, if any
            ids.add_key(x.record_id if record is None else own_id(x.get("id")) if isinstance(x, dict) else None)
        self._index(ids.take())
        if not self.records:
            hint = folder_hints(self.path) if self.path.is_dir() else ""
            raise DataError(self.path, f"no trajectories found: the canonical loader looked for "
                                       f"{FORMATS['canonical'].looked_for}{hint}")

    def _read(self, warnings: list[str]) -> Iterator[tuple[Path, str | None, object]]:
        """(file, record name, object) per record in data order; (file, None, DataError) for a malformed line."""
        for f in self.files:
            result = LoadResult(warnings=warnings)
            for record, obj in iter_json_lines(f, result):
                while result.errors:  # a malformed line read before this record
                    yield f, None, result.errors.pop(0)
                yield f, record, obj
            yield from ((f, None, e) for e in result.errors)

    def items(self, keep: Keep | None = None) -> Iterator[tuple[int, Item]]:
        """(position, Trajectory or DataError) for each record in data order; with `keep`, a record it
        refuses (by position and own id) is passed over without being parsed. A record whose id is
        repeated in the data is always parsed (which of them is the first decides which is an error)
        and asked about without its id (None)."""
        first: dict = {}
        for position, (f, record, obj) in enumerate(self._read([])):
            if record is None:
                if keep is None or keep(position, obj.record_id):
                    yield position, obj
                continue
            own = own_id(obj.get("id")) if isinstance(obj, dict) else None
            if self.repeated(own):  # always parsed, so the first record with the id is known to every shard
                item = self._parse(f, record, obj, first)
                if keep is None or keep(position, None):
                    yield position, item
            elif keep is None or keep(position, own):
                yield position, self._parse(f, record, obj, first)

    def _parse(self, f: Path, record: str, obj, first: dict) -> Item:
        try:
            t = canonical.parse_record(obj, f.parent, f, record, self.check_images, self.image_roots)
        except DataError as exc:
            return exc
        if self.ids.is_repeated(t.id):  # only ids seen twice in the first pass are followed exactly
            if t.id in first:
                where = "" if first[t.id] == f else f" (first in {first[t.id]})"
                return DataError(f, f"duplicate id {t.id!r}{where}", record, "id")
            first[t.id] = f
        return t

    def repeated(self, i: str | None) -> bool:
        """Whether an id belongs to more than one record (those records are always parsed)."""
        return i is not None and self.ids.is_repeated(i)


class LoadedStream(Indexed):
    """A `LoadResult` handed out as a stream: its bad records first, then its trajectories."""

    def __init__(self, loaded: LoadResult):
        self.loaded, self.warnings = loaded, loaded.warnings
        ids = IdBuilder()
        for x in [*loaded.errors, *loaded.trajectories]:
            ids.add_key(x.record_id if isinstance(x, DataError) else x.id)
        self._index(ids.take())

    def items(self, keep: Keep | None = None) -> Iterator[tuple[int, Item]]:
        """As `TrajectoryStream.items`."""
        for position, x in enumerate([*self.loaded.errors, *self.loaded.trajectories]):
            own = x.record_id if isinstance(x, DataError) else x.id
            if keep is None or keep(position, own):
                yield position, x

    def repeated(self, i: str | None) -> bool:
        """A LoadResult holds no repeated id (its loader turned the second into an error)."""
        return False


def stream_trajectories(path: str | Path, fmt: str = "auto", check_images: bool = True,
                        image_roots: Roots = ()) -> TrajectoryStream | LoadedStream:
    """The records of `path` as a stream (canonical JSONL), or loaded whole and handed out as one (the
    folder formats); the errors `load_trajectories` raises for data that cannot be read."""
    p = Path(path)
    name, options = split_format(fmt)
    if name == "auto":
        name = detect_format(p)
    if name == "canonical" and p.exists() and not options:
        return TrajectoryStream(p, check_images, image_roots)
    return LoadedStream(load_trajectories(p, fmt=fmt, check_images=check_images, image_roots=image_roots))


def as_stream(loaded: LoadResult | TrajectoryStream | LoadedStream) -> TrajectoryStream | LoadedStream:
    """A stream of `loaded`, which may already be one."""
    return LoadedStream(loaded) if isinstance(loaded, LoadResult) else loaded


def trajectories(stream: TrajectoryStream | LoadedStream) -> Iterator[Trajectory]:
    """The stream's trajectories in data order, its bad records left out."""
    return (x for _, x in stream.items() if isinstance(x, Trajectory))
