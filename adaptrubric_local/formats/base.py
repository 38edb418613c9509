"""Shared pieces for the trajectory loaders: errors that name file/record/field (and keep the
record's own id), a tolerant JSONL reader, and image-path resolution that refuses any path outside
the allowed folders (the dataset folder plus the roots the caller allows explicitly).

Knows nothing about any one on-disk format; each format module builds on these.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..schema import json_problem
from ..types import Trajectory

Roots = Iterable[str | os.PathLike]  # the extra folders screenshots may lie in
OUTSIDE_ROOTS = "escapes the dataset folder"  # the problem of an image path outside the allowed folders


class DataError(ValueError):
    """A problem with one record of the input, naming the file, the record and the field;
    `record_id` is the record's own id when it has one (the id its trajectory would have had)."""

    def __init__(self, file: str | os.PathLike, problem: str, record: str | None = None,
                 field: str | None = None, record_id: str | None = None):
        self.file, self.record, self.field, self.problem = str(file), record, field, problem
        self.record_id = record_id
        where = f", record {record}" if record is not None else ""
        where += f", field '{field}'" if field is not None else ""
        super().__init__(f"{self.file}{where}: {problem}")

    def __reduce__(self):
        return (DataError, (self.file, self.problem, self.record, self.field, self.record_id))


def own_id(value: Any) -> str | None:
    """A record's id as a string when it is a usable one (a non-empty string or an integer)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    return str(value) if str(value).strip() else None


_LEADING_ID = re.compile(r'\s*\{\s*"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)\s*[,}]')


def leading_id(text: str) -> str | None:
    """The id a JSON record that does not parse names as its first key, complete (`{"id": "t7", "instr`:
    a line cut short by a killed writer), or None; what a record reads as before it is parsed."""
    m = _LEADING_ID.match(text)
    with suppress(ValueError):
        return own_id(json.loads(m.group(1))) if m else None
    return None


def tag(exc: DataError, record_id: Any) -> DataError:
    """Give `exc` the record's own id (unless it already has one); returns `exc`."""
    if exc.record_id is None:
        exc.record_id = own_id(record_id)
    return exc


@contextmanager
def tagged(record_id: Any) -> Iterator[None]:
    """Give a DataError raised in the block the record's own id (`tag`)."""
    try:
        yield
    except DataError as exc:
        raise tag(exc, record_id) from None


@dataclass
class LoadResult:
    """What a loader produced: good trajectories, per-record errors, and warnings."""

    trajectories: list[Trajectory] = field(default_factory=list)
    errors: list[DataError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def extend(self, other: LoadResult) -> None:
        """Append another result's contents to this one."""
        self.trajectories += other.trajectories
        self.errors += other.errors
        self.warnings += other.warnings

    @contextmanager
    def catching(self, record_id: Any = None) -> Iterator[None]:
        """Keep a DataError raised in the block as one of `errors`, with the record's own id (`tag`)."""
        try:
            yield
        except DataError as exc:
            self.errors.append(tag(exc, record_id))


def iter_json_lines(path: Path, result: LoadResult) -> Iterator[tuple[str, Any]]:
    """Yield (record name, object) per JSON object; bad lines become errors (under the id the broken
    record names first, when it does: `leading_id`), several objects on one line are split with a
    warning naming the file."""
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            line = line.strip(" \t\r\n")
            if not line.strip():
                continue
            objs, pos, junk = [], 0, False
            try:
                while pos < len(line):
                    obj, pos = decoder.raw_decode(line, pos)
                    objs.append(obj)
                    while pos < len(line) and line[pos].isspace():
                        junk = junk or line[pos] not in " \t"
                        pos += 1
            except json.JSONDecodeError as exc:
                rid = None if objs else leading_id(line)
                result.errors.append(DataError(path, f"malformed JSON ({json_problem(exc)})", record_id=rid,
                                               record=f"line {lineno}" + (f" (id {rid})" if rid else "")))
                continue
            if len(objs) > 1:
                result.warnings.append(f"{path}: line {lineno} holds {len(objs)} JSON objects; "
                                       "read them as separate records")
            elif junk:
                result.warnings.append(f"{path}: line {lineno} is not strict JSONL (stray characters "
                                       "after the object); read the object and ignored them")
            for obj in objs:
                yield f"line {lineno}", obj


def load_json(path: Path) -> Any:
    """Read one JSON document, raising DataError on a parse failure."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataError(path, f"malformed JSON ({json_problem(exc, line=True)})") from None
    except OSError as exc:
        raise DataError(path, f"cannot read: {exc.strerror}") from None


def check_image_roots(roots: Iterable[str | os.PathLike]) -> tuple[Path, ...]:
    """The extra image folders a caller allows, resolved; DataError for one that is not a folder."""
    given = [Path(r).expanduser() for r in roots]
    if bad := next((p for p in given if not p.is_dir()), None):
        raise DataError(bad, "image root is not a folder (given as an extra folder screenshots may live in)")
    return tuple(p.resolve() for p in given)


def resolve_image(root: Path, rel: Any, file: Path, record: str, field_name: str,
                  must_exist: bool = True, image_roots: Iterable[str | os.PathLike] = ()) -> str:
    """Turn an image path from a record into an absolute, resolved path, or raise DataError.

    A relative path is taken from `root` (the dataset folder); an absolute one as it is. After
    following symlinks and `..`, the file must lie inside `root` or one of `image_roots`: this keeps
    a record (or a reward-service request) from naming an arbitrary file."""
    if not isinstance(rel, str) or not rel.strip():
        raise DataError(file, "image path missing or not a string", record, field_name)
    rel = rel.removeprefix("file://")
    allowed = tuple(dict.fromkeys([Path(root).resolve(), *(Path(r).resolve() for r in image_roots)]))
    full = (allowed[0] / rel).resolve()
    if not any(full.is_relative_to(a) for a in allowed):
        raise DataError(file, f"image path '{rel}' {OUTSIDE_ROOTS}: it resolves to {full}, outside "
                              f"the allowed folders ({', '.join(map(str, allowed))}: the dataset folder and any "
                              "extra image roots). If these images are meant to be read, pass --image-root DIR "
                              "(Python: image_roots=[DIR])", record, field_name)
    if must_exist and not full.is_file():
        raise DataError(file, f"image not found: {full}", record, field_name)
    return str(full)


def require(obj: dict, key: str, file: Path, record: str, kind: type | tuple = str) -> Any:
    """Return obj[key], raising DataError when it is missing or of the wrong type."""
    if not isinstance(obj, dict):
        raise DataError(file, f"expected a JSON object, got {type(obj).__name__}", record)
    if key not in obj or obj[key] is None:
        raise DataError(file, "required field missing", record, key)
    val = obj[key]
    if not isinstance(val, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise DataError(file, f"expected {names}, got {type(val).__name__}", record, key)
    return val


_LABELS = {**dict.fromkeys(("1", "success", "successful", "pass", "passed", "true", "yes"), 1),
           **dict.fromkeys(("0", "fail", "failed", "failure", "false", "no"), 0)}


def parse_label(value: Any, file: Path, record: str, field_name: str) -> int | None:
    """Read a success label: 0/1, booleans, SUCCESS/FAIL style strings, or None."""
    if value is None:
        return None
    if isinstance(value, (bool, int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in _LABELS:
        return _LABELS[value.strip().lower()]
    raise DataError(file, f"label must be 0/1 (or SUCCESS/FAIL), got {value!r}", record, field_name)


def check_nonempty(traj: Trajectory, file: Path, record: str) -> Trajectory:
    """Reject a trajectory with no steps or no screenshot at all."""
    if not traj.steps:
        raise DataError(file, "trajectory has no steps", record, "steps")
    if not traj.screenshots:
        raise DataError(file, "trajectory has no screenshots", record, "steps")
    if not traj.instruction.strip():
        raise DataError(file, "instruction is empty", record, "instruction")
    return traj
