"""Load trajectories from any supported on-disk format, detecting which one it is.

Formats: `canonical` (JSONL), `androidgen`, `zerogui`, `osreward`, `osreward-androidworld`, `clawgui`,
`clawgui-agent`, each registered in
`FORMATS` with `register_format` (how it is detected, what its loader looks for), as a user's file given
with `--plugins FILE.py` registers its own. Each loader returns a LoadResult: one bad record becomes a
DataError in `errors` (with the record's own id in `record_id` when it has one) and never loses the
other records. Loading nothing at all is an error naming what was looked for; verdict files (what
`score` writes) are recognised and never read as data. Screenshots must lie in the data folder or in a
folder the caller allows (`image_roots`).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..registry import Registry
from . import androidgen, canonical, clawgui, clawgui_agent, osreward, osreward_androidworld, others
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


FORMATS: Registry[FormatSpec] = Registry("data format")


def register_format(name: str, *, detect: Callable[[Path], bool], looked_for: str, shape: str, order: int = 0,
                    replace: bool = False):
    """Decorator: register the loader below as data format `name` (`--format NAME`, `fmt="NAME"`, and
    auto-detection by `detect`); see FormatSpec. The package's own formats have orders 10 to 50, so a
    user's (order 0 by default) is tried before them."""
    def wrap(load: Loader) -> Loader:
        FORMATS.add(name, FormatSpec(name, load, detect, looked_for, shape, order), replace)
        return load
    return wrap


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
register_format("androidgen", order=10, shape=androidgen.SHAPE, looked_for=androidgen.LOOKED_FOR,
                detect=androidgen.detect)(androidgen.load)
register_format("zerogui", order=20, shape="traj.jsonl (ZeroGUI/OSWorld)",
                looked_for="traj.jsonl (ZeroGUI/OSWorld result folders) anywhere below",
                detect=lambda p: p.name == "traj.jsonl" if p.is_file() else any(p.rglob("traj.jsonl")))(
                    others.load_zerogui)
register_format("osreward", order=50, shape=osreward.SHAPE, looked_for=osreward.LOOKED_FOR, detect=osreward.detect)(
    osreward.load)
register_format("osreward-androidworld", order=25, shape=osreward_androidworld.SHAPE,
                looked_for=osreward_androidworld.LOOKED_FOR, detect=osreward_androidworld.detect)(
                    osreward_androidworld.load)
register_format("clawgui", order=30, shape=clawgui.SHAPE, looked_for=clawgui.LOOKED_FOR, detect=clawgui.detect)(
    clawgui.load)
register_format("clawgui-agent", order=31, shape=clawgui_agent.SHAPE, looked_for=clawgui_agent.LOOKED_FOR,
                detect=clawgui_agent.detect)(clawgui_agent.load)


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
