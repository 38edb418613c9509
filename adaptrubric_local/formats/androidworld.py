"""Load an AndroidWorld run folder: one gzipped pickle per task instance.

Given a run folder, a folder of run folders, or one checkpoint. Read from the writer,
google-research/android_world (commit d9c569f764b3):
- `android_world/checkpointer.py` L53-72 (`_gzip_pickle`), L118-129 (`IncrementalCheckpointer.
  save_episodes`): `{directory}/{task_name}.pkl.gz`, a gzipped pickle of a list of episodes;
  L180-190: the run folder is `run_{%Y%m%dT%H%M%S%f}`.
- `android_world/suite_utils.py` L377, L403: one episode per file, named `{TaskTemplate}_{instance}`;
  L270-287: an episode is a dict with `goal`, `task_template`, `episode_data`, `is_successful`
  (0.0/1.0), `episode_length`, `exception_info`, `finish_dtime` (a datetime), ...; L546-557: a run
  that raised has `episode_data` and `is_successful` NaN and the traceback in `exception_info`.
- `android_world/episode_runner.py` L83-89, L108-125: `episode_data` is a dict of per-step lists
  (`step_number`, and whatever the agent's step data holds).
- `android_world/agents/m3a.py` L395, L434, L456, L462: `raw_screenshot` (the screen BEFORE the
  action, an RGB numpy array), `action_output` ("Reason: ... Action: {json}"), `action_reason`,
  `action_output_json` (a `json_action.JSONAction`); `agents/t3a.py` L325, L350: `before_screenshot`,
  `action_output`. `env/json_action.py` L80-115: JSONAction's fields (`action_type`, `text`, ...).

A pickle runs code when loaded, so it is read with `SafeUnpickler`, which admits only what the
checkpointer writes: Python's plain containers and scalars, numpy arrays/dtypes/scalars, datetimes,
and android_world's JSONAction / UIElement / BoundingBox dataclasses (rebuilt as inert records, without
importing android_world). Anything else is refused by its module and name, and the file is an error.

Screens are BEFORE their action (`SCREENS = "before"`). Each is written once as a PNG into a cache
folder (`png_dir=`; default `.adaptrubric-png/` in the run folder, one sub-folder per pickle named by
its content hash, so a changed pickle never reuses stale frames) because a Trajectory holds screenshot
paths. Action: the JSONAction (its `action_type`, `text` typed for `input_text`, the answer for
`answer`), else the JSON after `Action:` in `action_output`; thought: `action_reason`, else the text
after `Reason:`. Label: `is_successful` > 0.5; NaN (the run raised) is None with a warning naming the
exception. Platform: android. Not read: SoM screenshots, UI element lists, summaries, prompts, aux_data.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import pickle
from pathlib import Path
from typing import Any

from ..types import Step, Trajectory
from .base import DataError, LoadResult, Roots, check_nonempty

SCREENS = "before"
SHAPE = "*.pkl.gz (AndroidWorld)"
LOOKED_FOR = "*.pkl.gz (AndroidWorld checkpoints) in the folder or in its run sub-folders"
SUFFIX = ".pkl.gz"
_SHOT_KEYS = ("raw_screenshot", "before_screenshot", "screenshot", "pixels")
_ADMITTED = {
    "builtins": {"set", "frozenset", "complex", "bytearray", "bytes", "slice", "range", "float", "int", "str",
                 "list", "dict", "tuple", "bool", "object"},
    "collections": {"OrderedDict"}, "datetime": {"datetime", "date", "time", "timedelta", "timezone"},
    "_codecs": {"encode"}, "copyreg": {"_reconstructor"},
    **dict.fromkeys(("numpy", "numpy.core.multiarray", "numpy._core.multiarray", "numpy.core.numeric",
                     "numpy._core.numeric"), frozenset({"_reconstruct", "scalar", "_frombuffer", "ndarray", "dtype"})),
}
_RECORDS = {("android_world.env.json_action", "JSONAction"), ("android_world.env.representation_utils", "UIElement"),
            ("android_world.env.representation_utils", "BoundingBox")}


class Record:
    """An android_world dataclass instance read back as plain attributes (no android_world code runs)."""

    kind = "record"

    def __init__(self, *args, **kwargs):
        self.__dict__.update(kwargs)

    def __setstate__(self, state):
        self.__dict__.update(state if isinstance(state, dict) else {})


class SafeUnpickler(pickle.Unpickler):
    """Unpickle only the types AndroidWorld's checkpointer writes (see the module docstring)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _RECORDS:
            return type(name, (Record,), {"kind": name})
        if name in _ADMITTED.get(module, ()):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused {module}.{name}: not a type AndroidWorld's checkpointer writes")


def read_pickle(file: Path) -> Any:
    """The object in a gzipped pickle, read with SafeUnpickler; DataError when it cannot be."""
    try:
        with gzip.open(file, "rb") as fh:
            return SafeUnpickler(io.BytesIO(fh.read())).load()
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError) as exc:
        raise DataError(file, f"cannot read the checkpoint: {exc}") from None


def _png(arr: Any, path: Path) -> str:
    from PIL import Image
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(arr).save(path)
    return str(path.resolve())


def _action(data: dict, i: int) -> tuple[dict, str | None]:
    """(the action as a dict, the thought) of step i."""
    out, act, thought = (v[i] if isinstance(v := data.get(k), list) and i < len(v) else None
                         for k in ("action_output", "action_output_json", "action_reason"))
    action = {}
    if isinstance(act, Record):
        action = {k: v for k, v in act.__dict__.items() if v is not None}
    elif isinstance(out, str) and "Action:" in out:
        tail = out.rsplit("Action:", 1)[1].strip()
        try:
            action = json.loads(tail)
        except ValueError:
            action = {"raw": tail}
    if thought is None and isinstance(out, str) and "Reason:" in out:
        thought = out.split("Reason:", 1)[1].split("Action:", 1)[0].strip()
    return (action if isinstance(action, dict) else {"raw": action}), thought


def _steps(data: dict, shots_dir: Path, file: Path, rec: str) -> tuple[list[Step], str | None]:
    n = len(data.get("step_number") or next((v for v in data.values() if isinstance(v, list)), []))
    key = next((k for k in _SHOT_KEYS if isinstance(data.get(k), list)), None)
    if key is None:
        raise DataError(file, f"no screenshots: episode_data has none of {', '.join(_SHOT_KEYS)}", rec,
                        "episode_data")
    steps, answer = [], None
    for i in range(n):
        arr = data[key][i] if i < len(data[key]) else None
        shot = _png(arr, shots_dir / f"{i}.png") if getattr(arr, "ndim", 0) == 3 else None
        action, thought = _action(data, i)
        atype = action.get("action_type")
        text = action.get("text") if atype in ("input_text", "type") else None
        if atype == "answer" and isinstance(action.get("text"), str):
            answer = action["text"]
        steps.append(Step(screenshot=shot, action=json.dumps(action, ensure_ascii=False, default=str) if action
                          else "", action_type=atype, text=text, thought=thought or None))
    return steps, answer


def _label(ep: dict, file: Path, rec: str, warnings: list[str]) -> int | None:
    ok = ep.get("is_successful")
    if (isinstance(ok, float) and math.isnan(ok)) or ok is None:
        exc = str(ep.get("exception_info") or "no exception recorded").strip().splitlines()
        warnings.append(f"{file}: {rec} raised ({exc[-1][:120] if exc else ''}): label left empty, not 0")
        return None
    try:
        return int(float(ok) > 0.5)
    except (TypeError, ValueError):
        raise DataError(file, f"is_successful is not a number: {ok!r}", rec, "is_successful") from None


def load_file(file: Path, png_root: Path, stem: str) -> LoadResult:
    """The episodes of one `{task}.pkl.gz`; `stem`: its id (its path below the folder given, less the suffix)."""
    result = LoadResult()
    with result.catching(stem):
        episodes = read_pickle(file)
    if result.errors:
        return result
    episodes = episodes if isinstance(episodes, list) else [episodes]
    digest = hashlib.sha256(file.read_bytes()).hexdigest()[:12]
    for i, ep in enumerate(episodes):
        tid, rec = stem if len(episodes) == 1 else f"{stem}/{i}", f"episode {i}"
        with result.catching(tid):
            if not isinstance(ep, dict) or not isinstance(ep.get("goal"), str):
                raise DataError(file, "episode has no string 'goal'", rec, "goal")
            label = _label(ep, file, rec, result.warnings)
            data = ep.get("episode_data")
            if not isinstance(data, dict):
                raise DataError(file, f"no steps (episode_data is {data!r}; exception_info: "
                                f"{str(ep.get('exception_info'))[-120:]})", rec, "episode_data")
            shots = png_root / f"{stem.replace('/', '--')}-{digest}" / str(i)
            try:
                steps, answer = _steps(data, shots, file, rec)
            except OSError as exc:
                raise DataError(file, f"cannot write its screenshots as PNGs under {shots}: {exc.strerror or exc} "
                                "(give a writable folder with png_dir=DIR)", rec, "episode_data") from None
            traj = Trajectory(id=tid, instruction=ep["goal"], steps=steps, answer=answer, platform="android",
                              task_id=ep.get("task_template") or file.name[: -len(SUFFIX)], label=label,
                              source=str(file))
            result.trajectories.append(check_nonempty(traj, file, rec))
    return result


def load(path: Path, check_images: bool = True, image_roots: Roots = (),
         png_dir: str | os.PathLike | None = None) -> LoadResult:
    """Load every `*.pkl.gz` of an AndroidWorld run folder, of the run folders in a folder, or one such
    file; screenshots are written as PNGs under `png_dir` (default: `.adaptrubric-png/` in the folder
    given). Ids are the files' paths below the folder given, less `.pkl.gz`."""
    path = Path(path)
    base = path.parent if path.is_file() else path
    files = [path] if path.is_file() else checkpoints(path)
    root = Path(png_dir) if png_dir else base / ".adaptrubric-png"
    result = LoadResult()
    for f in files:
        result.extend(load_file(f, root, str(f.relative_to(base))[: -len(SUFFIX)]))
    return result


def detect(p: Path) -> bool:
    """A checkpoint, or a folder holding checkpoints (or run folders holding them)."""
    return p.name.endswith(SUFFIX) if p.is_file() else bool(checkpoints(p))


def checkpoints(folder: Path) -> list[Path]:
    """The checkpoints of a run folder, else those of its run sub-folders."""
    return sorted(folder.glob(f"*{SUFFIX}")) or sorted(folder.glob(f"*/*{SUFFIX}"))
