"""What a verdict file holds, read in memory that does not grow with its lines: the ids it answers (a
digest set, formats/ids.py), the last line of each id whose last line is an error (what a resume
retries), the running counts of its summary (`Tally`, the one place they are made, with exact sums), and
the last line per id one at a time (`iter_last_lines`: every reader of verdict files goes through it).
A torn last line (a writer killed mid-line) is cut off first, reading only the file's end.
Knows nothing about trajectories, scorers or settings.
"""
from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from .formats.base import leading_id
from .formats.ids import IdBuilder, IdSet

_SCALE = 1100  # floats are summed as exact multiples of 2**-1100 (every finite double is one)


def _exact(x: float) -> int:
    n, d = float(x).as_integer_ratio()
    return n * ((1 << _SCALE) // d)


def _float(acc: int) -> float:
    return float(Fraction(acc, 1 << _SCALE))


def counted(d: Any) -> dict:
    """The fields of a verdict (a line's dict or a Verdict) that the summary counts, and its error text."""
    get = d.get if isinstance(d, dict) else (lambda k, default=None: getattr(d, k, default))
    return {"status": get("status", "ok") or "ok", "score": get("score"), "hit_cap": bool(get("hit_cap")),
            "hit_context": bool(get("hit_context")), "cost_calls": get("cost_calls") or 0.0,
            "cost_tokens": get("cost_tokens") or 0.0, "error": get("error")}


@dataclass
class Tally:
    """Running counts of verdicts: `add` one, `remove` one added before (a retried error line)."""

    n: int = 0
    by_status: dict = field(default_factory=lambda: {"ok": 0, "unparsed": 0, "error": 0})
    positives: int = 0
    hit_cap: int = 0
    hit_context: int = 0
    calls: int = 0  # exact sums (see _exact) over the answered verdicts
    tokens: int = 0
    error_calls: int = 0

    def add(self, v: Any, sign: int = 1) -> None:
        """Count one verdict (a Verdict, a line's dict or a `counted` dict)."""
        c = counted(v)
        self.n += sign
        self.by_status[c["status"]] = self.by_status.get(c["status"], 0) + sign
        self.positives += sign * (c["score"] == 1)
        self.hit_cap += sign * c["hit_cap"]
        self.hit_context += sign * c["hit_context"]
        if c["status"] == "error":
            self.error_calls += sign * _exact(c["cost_calls"])
        else:
            self.calls += sign * _exact(c["cost_calls"])
            self.tokens += sign * _exact(c["cost_tokens"])

    def merge(self, other: Tally) -> None:
        """Add another tally's counts (verdicts of other ids)."""
        self.n += other.n
        for k, c in other.by_status.items():
            self.by_status[k] = self.by_status.get(k, 0) + c
        for k in ("positives", "hit_cap", "hit_context", "calls", "tokens", "error_calls"):
            setattr(self, k, getattr(self, k) + getattr(other, k))

    def remove(self, v: Any) -> None:
        """Take back a verdict counted before."""
        self.add(v, sign=-1)

    def summary(self, unparsed_calls: dict, seconds: float) -> dict:
        """The counts of a summary sidecar (`scoring.score_with` writes them)."""
        answered = self.n - self.by_status.get("error", 0)
        denom = max(1, answered)
        return {
            "n": self.n, "scored": self.by_status.get("ok", 0), "unparsed": self.by_status.get("unparsed", 0),
            "errors": self.by_status.get("error", 0), "positives": self.positives, "hit_cap": self.hit_cap,
            "hit_context": self.hit_context, "s_per_traj": seconds / denom, "seconds": seconds,
            "timed_trajectories": answered, "calls_per_traj": _float(self.calls) / denom,
            "tokens_per_traj": _float(self.tokens) / denom, "error_calls": _float(self.error_calls),
            "route_unparsed": unparsed_calls.get("route", 0), "cue_unparsed": unparsed_calls.get("cue", 0),
        }


def repair_torn_tail(path: Path) -> None:
    """Cut a torn last line (no newline at the end: a writer killed mid-line) off the file, reading
    only its end."""
    size = path.stat().st_size
    if size:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            keep = size if mm[-1:] == b"\n" else mm.rfind(b"\n") + 1  # rfind reads back from the end only
        if keep < size:
            os.truncate(path, keep)


def iter_lines(path: Path) -> Iterator[tuple[int, str, dict]]:
    """(line number, id, line dict) for each verdict line; ValueError naming the line that is not one."""
    for n, line in _numbered(path):
        try:
            d = json.loads(line)
            yield n, str(d["id"]), d
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ValueError(f"{path}: line {n} is not a verdict line (a JSON object with an 'id')") from None


def line_id(line: str, path: Path, n: int) -> str:
    """The id of verdict line `n` of `path`, read from its start when it leads with it (every line
    `score` writes does), else parsed; ValueError naming the line that is not a verdict line."""
    i = leading_id(line)
    if i is not None:
        return i
    try:
        return str(json.loads(line)["id"])
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f"{path}: line {n} is not a verdict line") from None


def iter_last_lines(path: Path, repair: bool = True) -> Iterator[dict]:
    """The last line (a dict) of each id, in the order the ids first appear, holding one line at a time:
    the one reader of "the last line per id". A first pass keeps the ids' digests, a second (when some id
    has several lines) where those ids' last lines start. With `repair`, a torn last line is cut off
    first (else it is an error naming the line); no file: no lines."""
    path = Path(path)
    if not path.is_file():
        return
    if repair:
        repair_torn_tail(path)
    ids, n = IdBuilder(), 0
    for k, line in _numbered(path):
        ids.add(line_id(line, path, k))
        n += 1
    seen = ids.freeze()
    if len(seen) == n:
        del seen  # every id once: nothing of the first pass is held while the lines are read
        yield from (d for _, _, d in iter_lines(path))
        return
    last: dict[str, int] = {}  # id with several lines -> where its last line starts
    with open(path, "rb") as fh:
        for k, raw in enumerate(iter(fh.readline, b""), start=1):
            if raw.strip():
                i = line_id(raw.decode("utf-8"), path, k)
                if seen.is_repeated(i):
                    last[i] = fh.tell() - len(raw)
    with open(path, "rb") as other:
        for _, i, d in iter_lines(path):
            if not seen.is_repeated(i):
                yield d
            elif i in last:
                other.seek(last.pop(i))
                yield json.loads(other.readline())


def compact_file(path: Path, out: Path) -> tuple[int, int]:
    """Write `path`'s last line per id (`iter_last_lines`) to `out`, with copies of its config and summary
    sidecars (the summary, counted from the last lines already, with `out` in it); returns (lines read,
    lines written). ValueError when `out` is `path` or holds lines."""
    path, out = Path(path), Path(out)
    if not path.is_file():
        raise ValueError(f"{path}: no such verdict file")
    if out.resolve() == path.resolve():
        raise ValueError(f"--out {out} is the verdict file itself: write the compacted file beside it")
    if out.exists() and out.stat().st_size:
        raise ValueError(f"{out} exists; choose another output")
    n_in = sum(1 for _ in _numbered(path))
    out.parent.mkdir(parents=True, exist_ok=True)
    n_out = 0
    with open(out, "w", encoding="utf-8") as fh:
        for d in iter_last_lines(path):
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
            n_out += 1
    for kind in ("config", "summary"):
        src = path.with_suffix(f".{kind}.json")
        if src.is_file():
            meta = json.loads(src.read_text())
            if kind == "summary" and isinstance(meta, dict):
                meta["out"] = str(out)
            out.with_suffix(f".{kind}.json").write_text(json.dumps(meta, indent=2) + "\n")
    return n_in, n_out


def _numbered(path: Path) -> Iterator[tuple[int, str]]:
    with open(path, encoding="utf-8") as fh:
        for k, line in enumerate(fh, start=1):
            if line.strip():
                yield k, line


@dataclass
class FileState:
    """A verdict file's ids, the last line of the ids whose last line is an error, and the `Tally` of
    its last line per id."""

    ids: IdSet = field(default_factory=lambda: IdSet.of(()))
    errors: dict = field(default_factory=dict)  # id -> counted() of its last line, an error
    tally: Tally = field(default_factory=Tally)
    lines: int = 0  # ids with a line (their last)

    def __bool__(self) -> bool:
        return self.lines > 0

    def done(self, i: str, retry_errors: bool) -> bool:
        """Whether id `i` is answered (with `retry_errors`, an id whose last line is an error is not)."""
        return i in self.ids and not (retry_errors and i in self.errors)

    @classmethod
    def scan(cls, path: Path) -> FileState:
        """Read `path` (a torn last line cut off first); an empty state when there is no such file."""
        ids, state = IdBuilder(), cls()
        for d in iter_last_lines(Path(path)):
            ids.add(str(d["id"]))
            c = counted(d)
            state.tally.add(c)
            state.lines += 1
            if c["status"] == "error":
                state.errors[str(d["id"])] = c
        state.ids = ids.freeze()
        return state
