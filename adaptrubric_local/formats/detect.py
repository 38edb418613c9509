"""Helpers for format detection: which result folder a path holds (OSWorld and ZeroGUI both write
`traj.jsonl`; ZeroGUI also writes `config.json` beside it and `output_text` in its rows), and, for a
path no format detects, the nearest match: the format whose marker files (the file names, their stems
and endings in its `shape`) the folder holds most of; and a JSON file (or its first line) peeked at
without raising. Knows nothing about the loaders themselves.
"""
from __future__ import annotations

import json
import re
from itertools import islice
from pathlib import Path
from typing import Any

MAX_FILES = 2000  # files looked at when naming the nearest match
_MARKER = re.compile(r"[\w*]*\.[\w.]+")


def peek_json(path: Path, line: bool = False) -> Any:
    """The JSON document of `path` (`line`: of its first non-empty line), or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = next((x for x in fh if x.strip()), "") if line else fh.read()
        return json.loads(text) if text else None
    except (OSError, ValueError):
        return None


def first_traj_row(p: Path) -> tuple[Path, bool] | None:
    """(the first traj.jsonl at or below `p`, whether it is ZeroGUI's), or None when there is none."""
    traj = (p if p.name == "traj.jsonl" else None) if p.is_file() else (
        p / "traj.jsonl" if (p / "traj.jsonl").is_file() else next(iter(sorted(p.rglob("traj.jsonl"))), None))
    if traj is None:
        return None
    if (traj.parent / "config.json").is_file():
        return traj, True
    row = peek_json(traj, line=True)
    return traj, isinstance(row, dict) and "output_text" in row


def _markers(shape: str) -> list[tuple[str, str, int]]:
    """(how, what, weight) of the file names, stems and endings a format's shape names:
    "*/record.jsonl (X)" -> [("name", "record.jsonl", 10), ("stem", "record", 5), ("end", ".jsonl", 1)]."""
    out = []
    for tok in _MARKER.findall(shape):
        name = tok.rsplit("/", 1)[-1]
        if not name.startswith("*"):
            out += [("name", name, 10), ("stem", name.split(".")[0], 5)]
        end = name[name.index("."):]
        out += [("end", end, 1)] + ([("end", "." + end.split(".")[1], 1)] if end.count(".") > 1 else [])
    return out


_HITS = {"name": lambda name, what: name == what, "end": str.endswith,
         "stem": lambda name, what: name.split(".")[0] == what and name != what}


def nearest_format(p: Path, shapes: list[tuple[str, str]]) -> str:
    """"; nearest match: NAME (...)" naming the format whose marker files `p` holds most of, or a
    sentence saying none of them was found."""
    files = [p] if p.is_file() else [f for f in islice(p.rglob("*"), MAX_FILES) if f.is_file()]
    best, best_score, best_hit = None, 0, None
    for name, shape in shapes:
        score, hit = 0, None
        for how, what, weight in _markers(shape):
            found = [f for f in files if _HITS[how](f.name, what)]
            score += len(found) * weight
            hit = hit or (found[0] if found else None)
        if score > best_score:
            best, best_score, best_hit = (name, shape), score, hit
    if best is None:
        return "; nearest match: none (no file here has a name or ending any of them looks for)"
    rel = best_hit.relative_to(p) if best_hit != p else best_hit.name
    return f"; nearest match: {best[0]} ({best[1]}: found {rel}, but not the layout it reads)"
