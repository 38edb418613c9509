"""Load trajectories from any supported on-disk format, detecting which one it is.

Formats: `canonical` (JSONL), `androidgen`, `zerogui`, `osreward`, `clawgui`, each registered in
`FORMATS` with `register_format` (how it is detected, what its loader looks for), as a user's file given
with `--plugins FILE.py` registers its own. Each loader returns a LoadResult: one bad record becomes a
DataError in `errors` (with the record's own id in `record_id` when it has one) and never loses the
other records. Loading nothing at all is an error naming what was looked for; verdict files (what
`score` writes) are recognised and never read as data. Screenshots must lie in the data folder or in a
folder the caller allows (`image_roots`).
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..registry import Registry
from . import androidgen, canonical, others
from .base import DataError, LoadResult, check_image_roots, resolve_image

Loader = Callable[..., LoadResult]  # load(path, check_images=True, image_roots=()) -> LoadResult


@dataclass(frozen=True)
class FormatSpec:
    """A registered data format: `load` reads a file or folder of it, `detect(path)` says whether a file
    or folder is one (tried in ascending `order`, ties in registration order), `looked_for` is what the
    loader looks for (said when nothing loads), `shape` how detection knows it (said when none does)."""

    name: str
    load: Loader
    detect: Callable[[Path], bool]
    looked_for: str
    shape: str
    order: int = 0


FORMATS: Registry[FormatSpec] = Registry("data format", FormatSpec)


def register_format(name: str, *, detect: Callable[[Path], bool], looked_for: str, shape: str, order: int = 0,
                    replace: bool = False):
    """Decorator: register the loader below as data format `name` (`--format NAME`, `fmt="NAME"`, and
    auto-detection by `detect`); see FormatSpec. The package's own formats have orders 10 to 50, so a
    user's (order 0 by default) is tried before them."""
    return FORMATS.register(name, replace=replace, detect=detect, looked_for=looked_for, shape=shape, order=order)


def data_jsonl(folder: Path, warnings: list[str] | None = None) -> list[Path]:
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


def folder_hints(folder: Path) -> str:
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
    tried = sorted(FORMATS.values(), key=lambda spec: spec.order)
    for spec in tried:
        if spec.detect(p):
            return spec.name
    shapes = ", ".join(spec.shape for spec in tried)
    if p.is_file():
        raise DataError(p, f"unknown file type: looked for {shapes}")
    raise DataError(p, f"could not detect the format: looked for {shapes}" + folder_hints(p))


def _is_osreward(p: Path) -> bool:
    if p.is_file():
        return p.suffix == ".json"
    for f in sorted(p.rglob("*.json"))[:20]:
        try:
            obj = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(obj, list):
            obj = obj[0] if obj else {}
        if isinstance(obj, dict) and "trace_id" in obj and "trajectory" in obj:
            return True
    return False


def _load_canonical(path: Path, check_images: bool = True, image_roots: Iterable[str | os.PathLike] = ()):
    """A canonical file, or every data *.jsonl of a folder (one id per data set, not per file)."""
    if not path.is_dir():
        return canonical.load(path, check_images, image_roots)
    result, seen = LoadResult(), {}
    for f in data_jsonl(path, result.warnings):
        result.extend(canonical.load(f, check_images, image_roots, seen))
    return result


register_format("canonical", order=40, shape="*.jsonl (canonical)",
                looked_for="one JSON trajectory per line ({\"id\", \"instruction\", \"steps\": [...]}) in *.jsonl",
                detect=lambda p: p.suffix == ".jsonl" if p.is_file() else bool(data_jsonl(p)))(_load_canonical)
register_format("androidgen", order=10, shape="*/record.jsonl (AndroidGen)",
                looked_for="record.jsonl (AndroidGen) in the folder or in its sub-folders",
                detect=lambda p: p.name == "record.jsonl" if p.is_file() else
                (p / "record.jsonl").is_file() or any(p.glob("*/record.jsonl")))(androidgen.load)
register_format("zerogui", order=20, shape="traj.jsonl (ZeroGUI/OSWorld)",
                looked_for="traj.jsonl (ZeroGUI/OSWorld result folders) anywhere below",
                detect=lambda p: p.name == "traj.jsonl" if p.is_file() else any(p.rglob("traj.jsonl")))(
                    others.load_zerogui)
register_format("osreward", order=50, shape="trace JSON (OSReward)", detect=_is_osreward,
                looked_for="trace JSON files (objects with trace_id and trajectory) anywhere below")(
                    others.load_osreward)
register_format("clawgui", order=30, shape="episode.json (ClawGUI)",
                looked_for="episode.json (ClawGUI) anywhere below",
                detect=lambda p: p.name == "episode.json" if p.is_file() else any(p.rglob("episode.json")))(
                    others.load_clawgui)


def _refuse_repeated_ids(result: LoadResult) -> None:
    """A second trajectory with an id already loaded becomes an error naming both sources: verdicts
    are matched to trajectories by id, so one id must mean one trajectory."""
    first: dict[str, str | None] = {}
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
    """Load every trajectory under `path`; `fmt` is a format registered in FORMATS or "auto".

    Screenshots may lie in the data folder or in one of `image_roots` (extra folders the caller
    allows; the CLI's `--image-root DIR`). Raises DataError when the path cannot be read as data
    or holds no trajectory and no bad record at all."""
    p = Path(path)
    if fmt == "auto":
        fmt = detect_format(p)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)} or auto")
    if not p.exists():
        raise DataError(p, "no such file or folder")
    roots = check_image_roots(image_roots)
    result = FORMATS[fmt].load(p, check_images=check_images, image_roots=roots)
    _refuse_repeated_ids(result)
    if not result.trajectories and not result.errors:
        hint = folder_hints(p) if p.is_dir() else ""
        raise DataError(p, f"no trajectories found: the {fmt} loader looked for {FORMATS[fmt].looked_for}{hint}")
    return result


__all__ = [
    "FORMATS",
    "DataError",
    "FormatSpec",
    "LoadResult",
    "canonical",
    "detect_format",
    "load_trajectories",
    "register_format",
    "resolve_image",
]
