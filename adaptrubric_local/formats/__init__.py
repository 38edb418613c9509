"""Load trajectories from any supported on-disk format, detecting which one it is.

Formats: `canonical` (JSONL), `androidgen`, `zerogui`, `osreward`, `clawgui`. Each loader returns a
LoadResult: one bad record becomes a DataError in `errors` and never loses the other records.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import androidgen, canonical, others
from .base import DataError, LoadResult

FORMATS = ("canonical", "androidgen", "zerogui", "osreward", "clawgui")

_LOADERS = {
    "canonical": canonical.load,
    "androidgen": androidgen.load,
    "zerogui": others.load_zerogui,
    "osreward": others.load_osreward,
    "clawgui": others.load_clawgui,
}


def _first_object(path: Path):
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                try:
                    return json.JSONDecoder().raw_decode(line)[0]
                except json.JSONDecodeError:
                    return None
    return None


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
    jsonl = sorted(p.glob("*.jsonl"))
    if jsonl:
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
                       "(ZeroGUI/OSWorld), episode.json (ClawGUI), *.jsonl (canonical), trace JSON (OSReward)")


def load_trajectories(path: str | Path, fmt: str = "auto", check_images: bool = True, image_roots=()) -> LoadResult:
    """Load every trajectory under `path`; `fmt` is one of FORMATS or "auto"."""
    p = Path(path)
    if fmt == "auto":
        fmt = detect_format(p)
    if fmt not in _LOADERS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)} or auto")
    if fmt == "canonical" and p.is_dir():
        result = LoadResult()
        for f in sorted(p.glob("*.jsonl")):
            result.extend(canonical.load(f, check_images))
        return result
    return _LOADERS[fmt](p, check_images=check_images)


__all__ = ["DataError", "LoadResult", "FORMATS", "detect_format", "load_trajectories", "canonical"]
