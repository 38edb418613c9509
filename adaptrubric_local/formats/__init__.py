"""Load trajectories from any supported on-disk format, detecting which one it is.

Each format (the package's are registered below) is in `FORMATS` by `register_format`: how it is
detected, what its loader looks for, whether its stored screenshot is the screen before or after its
action; a user's `--plugins FILE.py` registers its own. Loaders return steps whose screenshot is the
screen the action was taken on (`screens.py` re-pairs after-screens). Each returns a LoadResult: one bad
record is a DataError in `errors` (with the record's own id in `record_id`) and never loses the others.
A folder no format detects, or data that loads nothing, is an error naming what was looked for (and the
nearest match); verdict files (what `score` writes) are never read as data. Screenshots must lie in the
data folder or in a folder the caller allows (`image_roots`).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..registry import Registry
from ..types import Trajectory
from . import (
    agentrewardbench,
    androidgen,
    androidworld,
    canonical,
    clawgui,
    clawgui_agent,
    hf_dataset,
    online_mind2web,
    osreward,
    osreward_androidworld,
    osworld,
    zerogui,
)
from .base import DataError, LoadResult, Roots, check_image_roots, resolve_image
from .detect import first_traj_row, nearest_format
from .screens import SCREENS

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
    screens: str = "before"  # what its stored screenshot shows: the screen "before" or "after" its action

    def __post_init__(self):
        if self.screens not in SCREENS:
            raise ValueError(f"format {self.name!r}: screens must be one of {', '.join(SCREENS)}, got "
                             f"{self.screens!r}")


FORMATS: Registry[FormatSpec] = Registry("data format", FormatSpec)


def register_format(name: str, *, detect: Callable[[Path], bool], looked_for: str, shape: str, order: int = 0,
                    replace: bool = False, screens: str = "before"):
    """Decorator: register the loader below as data format `name` (`--format NAME`, `fmt="NAME"`, and
    auto-detection by `detect`); see FormatSpec. The package's own formats have orders 10 to 55, so a
    user's (order 0 by default) is tried before them. `screens="after"` records that the format stores the
    screen after each action (its loader still returns each action with the screen it was taken on)."""
    return FORMATS.register(name, replace=replace, detect=detect, looked_for=looked_for, shape=shape, order=order,
                            screens=screens)


_NOT_DATA = ((canonical.looks_like_verdicts, "a verdict file"),
             (canonical.looks_like_labels, "a labels file (give it with --labels)"))


def data_jsonl(folder: Path, warnings: list[str] | None = None) -> list[Path]:
    """The folder's own *.jsonl files that are not verdict or labels files (noted in `warnings`)."""
    out = []
    for f in sorted(folder.glob("*.jsonl")):
        what = next((what for looks, what in _NOT_DATA if f.is_file() and looks(f)), None)
        if what is None:
            out.append(f)
        elif warnings is not None:
            warnings.append(f"{f}: this looks like {what}, not trajectory data; skipped it")
    return out


def folder_hints(folder: Path) -> str:
    """What a folder that is not data holds instead: verdict files, and data files further down."""
    verdicts = [f.name for f in sorted(folder.glob("*.jsonl")) if canonical.looks_like_verdicts(f)]
    deeper = [f for f in sorted(folder.glob("*/*.jsonl")) + sorted(folder.glob("*/*/*.jsonl"))
              if f.name not in ("record.jsonl", "traj.jsonl") and not canonical.looks_like_verdicts(f)]
    out = ""
    if verdicts:
        out += f". {', '.join(verdicts)} looks like a verdict file (what `score` writes), not trajectory data"
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
    near = nearest_format(p, [(spec.name, spec.shape) for spec in tried])
    if p.is_file():
        raise DataError(p, f"unknown file type: looked for {shapes}{near}")
    raise DataError(p, f"could not detect the format: looked for {shapes}{near}" + folder_hints(p))


def _load_canonical(path: Path, check_images: bool = True, image_roots: Roots = ()):
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
                detect=androidgen.detect, screens=androidgen.SCREENS)(androidgen.load)
register_format("zerogui", order=20, shape="traj.jsonl + config.json (ZeroGUI)", screens=zerogui.SCREENS,
                looked_for="traj.jsonl with config.json beside it (ZeroGUI task folders) anywhere below",
                detect=lambda p: (first_traj_row(p) or (None, False))[1])(zerogui.load)
register_format("osworld", order=21, shape="traj.jsonl (OSWorld)", screens=osworld.SCREENS,
                looked_for="traj.jsonl (OSWorld results/{action_space}/{observation_type}/{model}/{domain}/{id}) "
                           "anywhere below", detect=lambda p: first_traj_row(p) is not None)(osworld.load)
for _name, _order, _module in (("androidworld", 25, androidworld), ("osreward-androidworld", 26, osreward_androidworld),
                               ("clawgui", 30, clawgui), ("clawgui-agent", 31, clawgui_agent),
                               ("osreward", 50, osreward)):
    register_format(_name, order=_order, shape=_module.SHAPE, looked_for=_module.LOOKED_FOR, detect=_module.detect,
                    screens=_module.SCREENS)(_module.load)
register_format("hf-dataset", **hf_dataset.REGISTRATION)(hf_dataset.load_hf_dataset)
register_format("agentrewardbench", **agentrewardbench.REGISTRATION)(agentrewardbench.load_agentrewardbench)
register_format("online-mind2web", **online_mind2web.REGISTRATION)(online_mind2web.load_online_mind2web)


def _refuse_repeated_ids(result: LoadResult) -> None:
    """A second trajectory with an id already loaded becomes an error naming both sources: verdicts
    are matched to trajectories by id, so one id must mean one trajectory."""
    first: dict[str, Trajectory] = {}
    for t in result.trajectories:
        if first.setdefault(t.id, t) is not t:
            result.errors.append(DataError(t.source or "?", f"duplicate id {t.id!r} (first in {first[t.id].source})",
                                           field="id"))
    result.trajectories = list(first.values())


def split_format(fmt: str) -> tuple[str, dict[str, str]]:
    """"osworld,examples=DIR,platform=windows" -> ("osworld", {"examples": "DIR", "platform": "windows"}):
    a format name and its loader's options, as `--format` takes them."""
    name, *rest = fmt.split(",")
    options = {}
    for item in rest:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"format option {item!r} in {fmt!r}: write NAME,KEY=VALUE[,KEY=VALUE...]")
        options[key.strip()] = value
    return name.strip(), options


def load_trajectories(path: str | Path, fmt: str = "auto", check_images: bool = True,
                      image_roots: Roots = (), options: dict | None = None) -> LoadResult:
    """Load every trajectory under `path`; `fmt` is a format registered in FORMATS or "auto", optionally
    followed by its loader's options (`split_format`: "osworld,examples=DIR").

    Screenshots may lie in the data folder or in one of `image_roots` (extra folders the caller
    allows; the CLI's `--image-root DIR`). `options` (and those in `fmt`) go to the format's loader
    (osworld: `examples`, `platform`; zerogui: `platform`; androidworld: `png_dir`); one it does not
    take is an error. Raises DataError when the path cannot be read as data or holds no trajectory and
    no bad record at all."""
    p = Path(path)
    fmt, in_fmt = split_format(fmt)
    options = {**in_fmt, **(options or {})}
    if fmt == "auto":
        fmt = detect_format(p)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)} or auto")
    if not p.exists():
        raise DataError(p, "no such file or folder")
    known = [n for n in inspect.signature(FORMATS[fmt].load).parameters
             if n not in ("path", "check_images", "image_roots")]
    if bad := [k for k in options if k not in known]:
        raise ValueError(f"format {fmt!r} takes no option {', '.join(map(repr, bad))}; its options: "
                         f"{', '.join(known) or 'none'}")
    result = FORMATS[fmt].load(p, check_images=check_images, image_roots=check_image_roots(image_roots), **options)
    _refuse_repeated_ids(result)
    if not result.trajectories and not result.errors:
        hint = folder_hints(p) if p.is_dir() else ""
        raise DataError(p, f"no trajectories found: the {fmt} loader looked for {FORMATS[fmt].looked_for}{hint}")
    return result


__all__ = ["FORMATS", "DataError", "FormatSpec", "LoadResult", "canonical", "detect_format", "load_trajectories",
           "register_format", "resolve_image", "split_format"]
