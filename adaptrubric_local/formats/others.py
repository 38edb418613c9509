"""Loaders for two more public trajectory layouts, each mapped onto Trajectory/Step:

- OSReward-style trace JSON: `trace_id`, `instruction`, `platform`,
  `trajectory[].screenshot_path/action/thought`, `human_label` SUCCESS|FAIL.
- ClawGUI `episode.json`: `meta_data.task_goal/success`, `episode[].image_path/model_response`.

A format's own file (`episode.json`) given directly is read as its folder. Every
screenshot must lie in the data folder or one of the caller's `image_roots`; errors carry the id the
trajectory would have had (`DataError.record_id`).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..types import Trajectory
from .actions_text import code_step
from .base import (
    DataError,
    LoadResult,
    check_nonempty,
    load_json,
    own_id,
    parse_label,
    require,
    resolve_image,
    tag,
)

Roots = Iterable[str | os.PathLike]


# ---------------------------------------------------------------- OSReward traces
def parse_osreward(obj: Any, file: Path, root: Path, check_images: bool = True, image_roots: Roots = ()) -> Trajectory:
    """One OSReward-style trace object -> Trajectory; a DataError carries the trace_id."""
    try:
        return _osreward(obj, file, root, check_images, tuple(image_roots))
    except DataError as exc:
        tag(exc, obj.get("trace_id") if isinstance(obj, dict) else None)
        raise


def _osreward(obj: Any, file: Path, root: Path, check_images: bool, image_roots: tuple) -> Trajectory:
    rec = f"trace {obj.get('trace_id')}" if isinstance(obj, dict) else "trace"
    steps_in = require(obj, "trajectory", file, rec, list)
    steps, answer = [], None
    for i, s in enumerate(steps_in):
        if not isinstance(s, dict):
            raise DataError(file, "step must be an object", rec, f"trajectory[{i}]")
        shot = resolve_image(root, s.get("screenshot_path"), file, rec, f"trajectory[{i}].screenshot_path",
                             check_images, image_roots)
        step, ans = code_step(shot, s.get("action"), s.get("thought"))
        steps.append(step)
        answer = ans if ans is not None else answer
    traj = Trajectory(id=str(require(obj, "trace_id", file, rec, (str, int))),
                      instruction=require(obj, "instruction", file, rec), steps=steps,
                      answer=obj.get("answer") if isinstance(obj.get("answer"), str) else answer,
                      platform=obj.get("platform"), task_id=obj.get("task_id"),
                      label=parse_label(obj.get("human_label"), file, rec, "human_label"), source=str(file))
    return check_nonempty(traj, file, rec)


def load_osreward(path: Path, check_images: bool = True, image_roots: Roots = ()) -> LoadResult:
    """Load one trace JSON, a list of traces, or a folder of trace JSON files."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*.json"))
    root = path.parent if path.is_file() else path
    result = LoadResult()
    for f in files:
        try:
            doc = load_json(f)
        except DataError as exc:
            result.errors.append(exc)
            continue
        items = doc if isinstance(doc, list) else [doc]
        for obj in items:
            if isinstance(obj, dict) and "trace_id" not in obj and path.is_dir():
                continue  # some other JSON in the folder
            try:
                result.trajectories.append(parse_osreward(obj, f, root, check_images, image_roots))
            except DataError as exc:
                result.errors.append(exc)
    return result


# ---------------------------------------------------------------- ClawGUI episodes
def clawgui_id(doc: Any, file: Path) -> str:
    """An episode's id: `meta_data.episode_id`, else its folder name."""
    meta = doc.get("meta_data") if isinstance(doc, dict) else None
    eid = meta.get("episode_id") if isinstance(meta, dict) else None
    return own_id(eid) or file.parent.name


def parse_clawgui(doc: Any, file: Path, root: Path, check_images: bool = True, image_roots: Roots = ()) -> Trajectory:
    """One ClawGUI `episode.json` -> Trajectory; image paths are relative to `root` (the episode's
    folder) and must lie there or in `image_roots`. A DataError carries the episode's id."""
    try:
        return _clawgui(doc, file, root, check_images, tuple(image_roots))
    except DataError as exc:
        tag(exc, clawgui_id(doc, file))
        raise


def _clawgui(doc: Any, file: Path, root: Path, check_images: bool, image_roots: tuple) -> Trajectory:
    rec = f"episode {file.parent.name}"
    meta = require(doc, "meta_data", file, rec, dict)
    episode = require(doc, "episode", file, rec, list)
    steps, answer = [], None
    for i, s in enumerate(episode):
        if not isinstance(s, dict):
            raise DataError(file, "step must be an object", rec, f"episode[{i}]")
        shot = resolve_image(root, s.get("image_path"), file, rec, f"episode[{i}].image_path", check_images,
                             image_roots)
        step, ans = code_step(shot, s.get("action") or s.get("model_response"), None)
        steps.append(step)
        answer = ans if ans is not None else answer
    goal = require(meta, "task_goal", file, rec)
    traj = Trajectory(id=clawgui_id(doc, file), instruction=goal, steps=steps,
                      answer=answer, platform=meta.get("platform", "android"),
                      task_id=meta.get("task_id") or meta.get("task_name"),
                      label=parse_label(meta.get("success"), file, rec, "meta_data.success"), source=str(file))
    return check_nonempty(traj, file, rec)


def load_clawgui(path: Path, check_images: bool = True, image_roots: Roots = ()) -> LoadResult:
    """Load one `episode.json` or every one under a folder (image paths relative to each file; any
    file under the data folder is allowed)."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(path.rglob("episode.json"))
    roots = (path.parent if path.is_file() else path, *image_roots)
    result = LoadResult()
    for f in files:
        try:
            doc = load_json(f)
        except DataError as exc:
            result.errors.append(tag(exc, f.parent.name))
            continue
        try:
            result.trajectories.append(parse_clawgui(doc, f, f.parent, check_images, roots))
        except DataError as exc:
            result.errors.append(exc)
    return result
