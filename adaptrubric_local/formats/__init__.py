"""Load trajectories from any supported on-disk format, detecting which one it is.

Formats: `canonical` (JSONL), `androidgen`, `zerogui`, `osreward`, `clawgui`. Each loader returns a
LoadResult: one bad record becomes a DataError in `errors` (with the record's own id in `record_id`
when it has one) and never loses the other records. Loading nothing at all is an error naming what
was looked for; verdict files (what `score` writes) are recognised and never read as data.
Screenshots must lie in the data folder or in a folder the caller allows (`image_roots`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Optional

from . import androidgen, canonical, others
from .base import DataError, LoadResult, check_image_roots

FORMATS = ("canonical", "androidgen", "zerogui", "osreward", "clawgui")

_LOADERS = {
    "canonical": canonical.load,
    "androidgen": androidgen.load,
    "zerogui": others.load_zerogui,
    "osreward": others.load_osreward,
    "clawgui": others.load_clawgui,
}


LOOKED_FOR = {
    "canonical": "one JSON trajectory per line ({\"id\", \"instruction\", \"steps\": [...]}) in *.jsonl",
    "androidgen": "record.jsonl (AndroidGen) in the folder or in its sub-folders",
    "zerogui": "traj.jsonl (ZeroGUI/OSWorld result folders) anywhere below",
    "osreward": "trace JSON files (objects with trace_id and trajectory) anywhere below",
    "clawgui": "episode.json (ClawGUI) anywhere below",
}


def _data_jsonl(folder: Path, warnings: list[str] | None = None) -> list[Path]:
    """The folder's own *.jsonl files that are not verdict files (noted in `warnings`)."""
    out = []
    for f in sorted(folder.glob("*.jsonl")):
        if f.is_file() and canonical.looks_like_verdicts(f):
            if warnings is not None:
                warnings.append(f"{f}: this looks like a verdict file, not trajectory data; skipped it")
            continue
        if f.is_file() and canonical.looks_like_labels(f):
            if warnings is not None:
                warnings.append(f"{f}: this looks like a labels file (give it with --labels), not trajectory "
                                "data; skipped it")
            continue
        out.append(f)
    return out


def _hints(folder: Path) -> str:
    """What a folder that is not data holds instead: verdict files, and data files further down."""
    verdicts = [f.name for f in sorted(folder.glob("*.jsonl")) if canonical.looks_like_verdicts(f)]
    deeper = [f for f in sorted(folder.glob("*/*.jsonl")) + sorted(folder.glob("*/*/*.jsonl"))
              if f.name not in ("record.jsonl", "traj.jsonl") and not canonical.looks_like_verdicts(f)]
    out = ""
    if verdicts:
        out += (f". {', '.join(verdicts)} looks like a verdict file (what `score` writes), not trajectory "
                "data")
    if deeper:
        out += f". Trajectory data may be in: {', '.join(map(str, deeper[:5]))}; pass that path instead"
    return out


def detect_format(path: str | Path) -> str:
    """Name the format of a file or folder, or raise DataError saying what was looked for."""
    p = Path(path)
    if not p.exists():
        raise DataError(p, "no such file or folder")
    if p.is_file():
        if p.name == "episode.json":
            return "clawgui"
        if p.name == "record.jsonl":
            return "androidgen"
        if p.name == "traj.jsonl":
            return "zerogui"
        if p.suffix == ".jsonl":
            return "canonical"
        if p.suffix == ".json":
            return "osreward"
        raise DataError(p, "unknown file type: expected .jsonl (canonical), .json (OSReward) or episode.json")
    if (p / "record.jsonl").is_file() or any(p.glob("*/record.jsonl")):
        return "androidgen"
    if (p / "traj.jsonl").is_file() or any(p.rglob("traj.jsonl")):
        return "zerogui"
    if any(p.rglob("episode.json")):
        return "clawgui"
    if _data_jsonl(p):
        return "canonical"
    for f in sorted(p.rglob("*.json"))[:20]:
        try:
            obj = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(obj, list):
            obj = obj[0] if obj else {}
        if isinstance(obj, dict) and "trace_id" in obj and "trajectory" in obj:
            return "osreward"
    raise DataError(p, "could not detect the format: looked for */record.jsonl (AndroidGen), traj.jsonl "
                       "(ZeroGUI/OSWorld), episode.json (ClawGUI), *.jsonl (canonical), trace JSON (OSReward)"
                       + _hints(p))


def _refuse_repeated_ids(result: LoadResult) -> None:
    """A second trajectory with an id already loaded becomes an error naming both sources: verdicts
    are matched to trajectories by id, so one id must mean one trajectory."""
    first: dict[str, Optional[str]] = {}
    keep = []
    for t in result.trajectories:
        if t.id in first:
            result.errors.append(DataError(t.source or "?", f"duplicate id {t.id!r} (first in {first[t.id]})",
                                           field="id"))
        else:
            first[t.id] = t.source
            keep.append(t)
    result.trajectories = keep


def load_trajectories(path: str | Path, fmt: str = "auto", check_images: bool = True,
                      image_roots: Iterable[str | os.PathLike] = ()) -> LoadResult:
    """Load every trajectory under `path`; `fmt` is one of FORMATS or "auto".

    Screenshots may lie in the data folder or in one of `image_roots` (extra folders the caller
    allows; the CLI's `--image-root DIR`). Raises DataError when the path cannot be read as data
    or holds no trajectory and no bad record at all."""
    p = Path(path)
    if fmt == "auto":
        fmt = detect_format(p)
    if fmt not in _LOADERS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)} or auto")
    if not p.exists():
        raise DataError(p, "no such file or folder")
    roots = check_image_roots(image_roots)
    if fmt == "canonical" and p.is_dir():
        result, seen = LoadResult(), {}
        for f in _data_jsonl(p, result.warnings):
            result.extend(canonical.load(f, check_images, roots, seen))  # one id per data set, not per file
    else:
        result = _LOADERS[fmt](p, check_images=check_images, image_roots=roots)
        _refuse_repeated_ids(result)
    if not result.trajectories and not result.errors:
        hint = _hints(p) if p.is_dir() else ""
        raise DataError(p, f"no trajectories found: the {fmt} loader looked for {LOOKED_FOR[fmt]}{hint}")
    return result


__all__ = ["DataError", "LoadResult", "FORMATS", "detect_format", "load_trajectories", "canonical"]
