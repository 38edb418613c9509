"""The canonical format: JSONL, one trajectory per line, image paths relative to the JSONL file.

`{"id", "instruction", "steps": [{"screenshot", "action", "action_type"?, "text"?, "thought"?}],
  "answer"?, "platform"?, "task_id"?, "label"? (0/1)}`

A verdict file (what `score` writes) is also JSONL; `looks_like_verdicts` tells the two apart so a
verdict file is never read as (empty) data.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..types import Step, Trajectory
from .actions_text import action_text, step_objects
from .base import DataError, LoadResult, check_nonempty, iter_json_lines, parse_label, require, resolve_image, tagged

TOP_KEYS = {"id", "instruction", "steps", "answer", "platform", "task_id", "label"}
STEP_KEYS = {"screenshot", "action", "action_type", "text", "thought"}


def _opt_str(obj: dict, key: str, file: Path, record: str, prefix: str = ""):
    """obj[key] as an optional string (numbers are written out); `prefix` locates obj in the record."""
    val = obj.get(key)
    if val is None:
        return None
    if isinstance(val, (int, float)) and not isinstance(val, bool):
        return str(val)
    if not isinstance(val, str):
        raise DataError(file, f"expected a string, got {type(val).__name__}", record, prefix + key)
    return val


def _first_keys(path: Path) -> set:
    """The keys of the file's first JSON object (none when it is not an object or cannot be read)."""
    try:
        obj = next((obj for _, obj in iter_json_lines(Path(path), LoadResult())), None)
    except (OSError, UnicodeDecodeError):
        return set()
    return set(obj) if isinstance(obj, dict) else set()


def looks_like_verdicts(path: Path) -> bool:
    """True when the file's first JSON object is a verdict line (status/score, no steps)."""
    keys = _first_keys(path)
    return "steps" not in keys and "status" in keys and bool({"score", "p_success"} & keys)


def looks_like_labels(path: Path) -> bool:
    """True when the file's first JSON object is a labels line (id and label, no steps or instruction:
    what the review page exports), which is read with --labels, never as data."""
    keys = _first_keys(path)
    return {"id", "label"} <= keys and not {"steps", "instruction", "status"} & keys


def verdict_file_error(path: Path) -> DataError:
    """The error for a verdict file given where trajectory data was expected."""
    return DataError(path, "this looks like a verdict file (its lines have status/score fields and no "
                           "steps), not trajectory data; give the data that was scored (a canonical JSONL "
                           "with id, instruction and steps, or a folder in a supported format)")


def refuse_not_data(path: Path) -> None:
    """Raise DataError when the file is a verdict file or a labels file, not trajectory data."""
    if looks_like_verdicts(path):
        raise verdict_file_error(path)
    if looks_like_labels(path):
        raise DataError(path, "this looks like a labels file (lines of id and label, as the review page exports), "
                              "not trajectory data; give the data as DATA (the first argument) and this file with "
                              "--labels")


def _nearest(unknown: set, known: frozenset | set) -> str:
    """' (did you mean ...?)' naming the known key nearest each unknown one that is close to one; '' else."""
    import difflib

    near = [(k, m[0]) for k in sorted(unknown) if (m := difflib.get_close_matches(k, sorted(known), n=1))]
    return f" (did you mean {', '.join(f'{m!r} for {k!r}' for k, m in near)}?)" if near else ""


def parse_record(obj: dict, root: Path, file: Path, record: str, check_images: bool = True,
                 image_roots: Iterable[str | os.PathLike] = ()) -> Trajectory:
    """Build a Trajectory from one canonical record, or raise DataError (with `record_id` set to
    the record's own id when it has one). Relative screenshots are taken from `root`; every
    screenshot must lie inside `root` or one of `image_roots`."""
    tid = obj.get("id") if isinstance(obj, dict) else None
    rec, image_roots = f"{record} (id {tid})" if tid is not None else record, tuple(image_roots)
    with tagged(tid):
        unknown = set(obj) - TOP_KEYS if isinstance(obj, dict) else set()
        if unknown:  # before the required fields: a misspelled `stpes` is named, not `steps` missing
            raise DataError(file, f"unknown keys {sorted(unknown)}{_nearest(unknown, TOP_KEYS)}; allowed: "
                                  f"{sorted(TOP_KEYS)}", rec)
        steps = []
        for i, s in step_objects(obj, "steps", file, rec, "step must be a JSON object"):
            fname = f"steps[{i}]"
            if bad := set(s) - STEP_KEYS:
                raise DataError(file, f"unknown step keys {sorted(bad)}{_nearest(bad, STEP_KEYS)}; allowed: "
                                      f"{sorted(STEP_KEYS)}", rec, fname)
            shot = s.get("screenshot")
            shot = (resolve_image(root, shot, file, rec, f"{fname}.screenshot", check_images, image_roots)
                    if shot is not None else None)
            steps.append(Step(screenshot=shot, action=action_text(s.get("action", "")), **{
                k: _opt_str(s, k, file, rec, f"{fname}.") for k in ("action_type", "text", "thought")}))
        traj = Trajectory(id=str(require(obj, "id", file, rec, (str, int))),
                          instruction=require(obj, "instruction", file, rec), steps=steps,
                          **{k: _opt_str(obj, k, file, rec) for k in ("answer", "platform", "task_id")},
                          label=parse_label(obj.get("label"), file, rec, "label"), source=str(file))
        return check_nonempty(traj, file, rec)


def load(path: Path, check_images: bool = True, image_roots: Iterable[str | os.PathLike] = (),
         seen: dict[str, Path] | None = None) -> LoadResult:
    """Load a canonical JSONL file; bad records become errors, the rest still load. A verdict
    file raises DataError (it is not data). `seen` (id -> file) carries the ids of files loaded
    before this one (a folder of files is one data set): a repeated id is an error there too."""
    path = Path(path)
    refuse_not_data(path)
    result = LoadResult()
    seen = {} if seen is None else seen
    for record, obj in iter_json_lines(path, result):
        with result.catching():
            traj = parse_record(obj, path.parent, path, record, check_images, image_roots)
            if traj.id in seen:
                # no record_id: the id belongs to the record that loaded; this error keeps its line
                where = "" if seen[traj.id] == path else f" (first in {seen[traj.id]})"
                raise DataError(path, f"duplicate id {traj.id!r}{where}", record, "id")
            seen[traj.id] = path
            result.trajectories.append(traj)
    return result


def write(trajectories: Iterable[Trajectory], path: Path, reference: bool = False) -> None:
    """Write trajectories as canonical JSONL with screenshot paths relative to `path`'s folder
    (never absolute), so the folder can be moved or copied as a whole. Nothing is written when a
    screenshot lies outside that folder, unless `reference`: then the path leads out of it (`../`)
    to the screenshot where it is, and a reader must allow that folder (`--image-root`)."""
    path = Path(path)
    lines = [record_line(t, path, reference) for t in trajectories]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")


def record_line(t: Trajectory, path: Path, reference: bool = False) -> str:
    """One trajectory's canonical JSONL line for the file `path` (screenshots as `write` gives them),
    so a caller streaming records writes them one at a time."""
    base = Path(path).parent.resolve()
    d = t.to_dict()
    for s in d["steps"]:
        if not s.get("screenshot"):
            continue
        full = Path(s["screenshot"]).resolve()  # a relative path is taken from the working folder, as open() would
        if reference:
            try:
                s["screenshot"] = Path(os.path.relpath(full, base)).as_posix()
            except ValueError:  # another drive: no relative path leads there
                s["screenshot"] = full.as_posix()
        elif not full.is_relative_to(base):
            raise ValueError(f"{path}, trajectory {t.id}: screenshot {s['screenshot']} lies outside {base}; write the "
                             "JSONL into a folder that contains its images")
        else:
            s["screenshot"] = full.relative_to(base).as_posix()
    return json.dumps(d, ensure_ascii=False) + "\n"
