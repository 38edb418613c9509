"""The canonical format: JSONL, one trajectory per line, image paths relative to the JSONL file.

`{"id", "instruction", "steps": [{"screenshot", "action", "action_type"?, "text"?, "thought"?}],
  "answer"?, "platform"?, "task_id"?, "label"? (0/1)}`
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from ..types import Step, Trajectory
from .base import DataError, LoadResult, check_nonempty, iter_json_lines, parse_label, require, resolve_image

TOP_KEYS = {"id", "instruction", "steps", "answer", "platform", "task_id", "label"}
STEP_KEYS = {"screenshot", "action", "action_type", "text", "thought"}


def _opt_str(obj: dict, key: str, file: Path, record: str):
    val = obj.get(key)
    if val is None:
        return None
    if isinstance(val, (int, float)) and not isinstance(val, bool):
        return str(val)
    if not isinstance(val, str):
        raise DataError(file, f"expected a string, got {type(val).__name__}", record, key)
    return val


def parse_record(obj: dict, root: Path, file: Path, record: str, check_images: bool = True) -> Trajectory:
    """Build a Trajectory from one canonical record, or raise DataError."""
    tid = obj.get("id") if isinstance(obj, dict) else None
    rec = f"{record} (id {tid})" if tid is not None else record
    steps_in = require(obj, "steps", file, rec, list)
    unknown = set(obj) - TOP_KEYS
    if unknown:
        raise DataError(file, f"unknown keys {sorted(unknown)}; allowed: {sorted(TOP_KEYS)}", rec)
    steps = []
    for i, s in enumerate(steps_in):
        fname = f"steps[{i}]"
        if not isinstance(s, dict):
            raise DataError(file, "step must be a JSON object", rec, fname)
        bad = set(s) - STEP_KEYS
        if bad:
            raise DataError(file, f"unknown step keys {sorted(bad)}; allowed: {sorted(STEP_KEYS)}", rec, fname)
        shot = s.get("screenshot")
        shot = (resolve_image(root, shot, file, rec, f"{fname}.screenshot", check_images)
                if shot is not None else None)
        action = s.get("action", "")
        if not isinstance(action, str):
            action = json.dumps(action, ensure_ascii=False)
        steps.append(Step(screenshot=shot, action=action,
                          action_type=_opt_str(s, "action_type", file, rec),
                          text=_opt_str(s, "text", file, rec), thought=_opt_str(s, "thought", file, rec)))
    traj = Trajectory(
        id=str(require(obj, "id", file, rec, (str, int))),
        instruction=require(obj, "instruction", file, rec),
        steps=steps,
        answer=_opt_str(obj, "answer", file, rec),
        platform=_opt_str(obj, "platform", file, rec),
        task_id=_opt_str(obj, "task_id", file, rec),
        label=parse_label(obj.get("label"), file, rec, "label"),
        source=str(file),
    )
    return check_nonempty(traj, file, rec)


def load(path: Path, check_images: bool = True) -> LoadResult:
    """Load a canonical JSONL file; bad records become errors, the rest still load."""
    result = LoadResult()
    seen: set[str] = set()
    for record, obj in iter_json_lines(path, result):
        try:
            traj = parse_record(obj, path.parent, path, record, check_images)
        except DataError as exc:
            result.errors.append(exc)
            continue
        if traj.id in seen:
            result.errors.append(DataError(path, f"duplicate id {traj.id!r}", record, "id"))
            continue
        seen.add(traj.id)
        result.trajectories.append(traj)
    return result


def write(trajectories: Iterable[Trajectory], path: Path) -> None:
    """Write trajectories as canonical JSONL with screenshot paths relative to `path`'s folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    base = path.parent.resolve()
    with open(path, "w", encoding="utf-8") as fh:
        for t in trajectories:
            d = t.to_dict()
            for s in d["steps"]:
                if s.get("screenshot"):
                    p = Path(s["screenshot"])
                    if p.is_absolute() and base not in p.resolve().parents:
                        raise ValueError(f"{path}: screenshot {p} of trajectory {t.id} lies outside {base}; "
                                         "write the JSONL into a folder that contains its images")
                    s["screenshot"] = str(p.resolve().relative_to(base)) if p.is_absolute() else str(p)
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
