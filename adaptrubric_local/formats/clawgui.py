"""ClawGUI-RL episodes, read as ZJU-REAL/ClawGUI writes them (commit d990d3e):

- `clawgui-rl/agent_system/multi_turn_rollout/utils.py` L220-327 (`save_episode_to_json`) lays out
  `<save_dir>/<task_name with " " and "/" as "_">/<episode_id>/episode.json` and `images/step_0000.png`,
  with `meta_data` (`task_name`, `task_goal`, `episode_id`, `created_at`) and `episode[]` (`step`,
  `image_path` written ABSOLUTE or null when the image could not be saved, `model_response`, `timestamp`);
  L330-377 (`update_episode_result`) adds `success` (eval_score > 0), `eval_score`, `eval_reason`,
  `episode_reward`, `episode_length` once the run is evaluated.
- `rollout_loop.py` L487-518 saves, per step, the observation BEFORE the action with the action taken on
  it (`SCREENS = "before"`); L609-634 takes eval_score 0.0 when no step reported one.
- `model_response` is the model's raw text: `<thinking>...</thinking><tool_call>{"name": "mobile_use",
  "arguments": {"action": ..., "text": ...}}</tool_call>` (`formats.tool_calls`): `type` gives the
  typed text, `answer` the answer; the thought is the text before the call.

Labels: `meta_data.success`. A run whose evaluation itself failed is not a failure of the task: the
MobileWorld env writes `eval_reason` "eval_failed_all_retries" with score 0
(`agent_system/environments/env_package/mobileworld/envs.py` L555-560), the real-device judge
"eval_exception: ..." (`agent_system/environments/env_manager.py` L1034-1038): those become no label
(None), with a warning. An episode never evaluated (no `success`) has no label. Nor does one that ended
without an evaluation: a step that failed on the device ends the episode with no `eval_score` of its own
(envs.py L480-503), so the rollout takes the last non-evaluating step's score 0.0 and empty reason
(envs.py L583-590, rollout_loop.py L616-622); an empty `eval_reason` after a last action that is neither
`answer` nor `terminate` is read so (no label, with a warning). An evaluator that gives an empty reason
after the step limit is read so too: unknown rather than a wrong 0.

Image paths: a relative one is taken from the episode's folder. An absolute one is used as written when it
lies in the data folder (or an extra image root); otherwise it is re-rooted: the part after
`<task folder>/<episode_id>/` is taken from the episode's folder where it now is (a run copied to
another disk). A path that matches neither is refused as escaping the dataset folder.

Platform: android (MobileWorld and real Android devices). What is not read: `step_reward`,
`eval_score` as a graded score, `episode_reward`, timestamps.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..types import Trajectory
from . import tool_calls
from .actions_text import action_text, described_step, gather, step_objects
from .base import DataError, LoadResult, Roots, check_nonempty, load_json, own_id, require, resolve_image, tagged
from .detect import peek_json

SCREENS = "before"
SHAPE = "episode.json with meta_data (ClawGUI-RL)"
LOOKED_FOR = "episode.json files with meta_data and episode[] (ClawGUI-RL) anywhere below"
EVAL_FAILED = ("eval_failed_all_retries", "eval_exception")


def episode_files(p: Path) -> list[Path]:
    """`p` itself when it is a file, else the episode.json files below it (sorted)."""
    return [p] if p.is_file() else sorted(p.rglob("episode.json"))


def peek_episodes(p: Path) -> list[dict]:
    """The objects of the first five episode.json files of `p` that read as JSON objects (none when `p`
    is another file)."""
    if p.is_file() and p.name != "episode.json":
        return []
    return [d for d in map(peek_json, episode_files(p)[:5]) if isinstance(d, dict)]


def detect(p: Path) -> bool:
    """An episode.json (or a folder holding them) whose object has `meta_data` and `episode`."""
    return any("meta_data" in d and "episode" in d for d in peek_episodes(p))


def episode_id(doc: Any, file: Path) -> str:
    """An episode's id: `meta_data.episode_id`, else its folder name."""
    meta = doc.get("meta_data") if isinstance(doc, dict) else None
    eid = meta.get("episode_id") if isinstance(meta, dict) else None
    return own_id(eid) or file.parent.name


def image(raw: Any, episode_dir: Path, file: Path, rec: str, field: str, check: bool, roots: tuple) -> str:
    """One step's screenshot path, resolved as the module docstring says."""
    if isinstance(raw, str) and os.path.isabs(raw) and not any(Path(raw).resolve().is_relative_to(r) for r in roots):
        # re-rooted: the part after `<task folder>/<episode_id>/` (as the folders are named now), taken from here
        parts, here = Path(raw).parts, (episode_dir.parent.name, episode_dir.name)
        j = next((j for j in range(len(parts) - 2, 0, -1) if parts[j - 1:j + 1] == here), None)
        raw = raw if j is None else str(episode_dir.joinpath(*parts[j + 1:]))
    return resolve_image(episode_dir, raw, file, rec, field, check, roots)


def label(meta: dict, last_type: str | None, file: Path, warnings: list[str]) -> int | None:
    """`meta_data.success` as 0/1; None when never evaluated, when the evaluation itself failed, or when
    the episode ended without one (`last_type`: the last step's action type)."""
    if "success" not in meta or meta["success"] is None:
        return None
    reason = str(meta.get("eval_reason") or "")
    if reason.startswith(EVAL_FAILED):
        warnings.append(f"{file}: the evaluation failed ({reason[:80]!r}), not the task: no label")
        return None
    if meta["success"] is False and not reason and last_type not in ("answer", "terminate"):
        warnings.append(f"{file}: the episode ended without an evaluation (last action not answer/terminate, "
                        "no eval_reason: a device error or a cut rollout): no label")
        return None
    if not isinstance(meta["success"], bool):
        raise DataError(file, f"expected true or false, got {meta['success']!r}", None, "meta_data.success")
    return int(meta["success"])


def _step(s: dict, i: int, file: Path, rec: str, check: bool, roots: tuple):
    shot = (None if s.get("image_path") is None else
            image(s["image_path"], file.parent, file, rec, f"episode[{i}].image_path", check, roots))
    response = s.get("model_response")
    args = tool_calls.arguments_of(response)
    described = (action_text(response), None, None, None) if args is None else tool_calls.describe(args)
    return described_step(shot, described, tool_calls.thought_before(response))


def parse(doc: Any, file: Path, check_images: bool, roots: tuple, warnings: list[str]) -> Trajectory:
    """One ClawGUI-RL `episode.json` -> Trajectory; a DataError carries the episode's id."""
    rec = f"episode {file.parent.name}"
    with tagged(episode_id(doc, file)):
        meta = require(doc, "meta_data", file, rec, dict)
        steps, answer = gather(_step(s, i, file, rec, check_images, roots)
                               for i, s in step_objects(doc, "episode", file, rec))
        if missing := sum(s.screenshot is None for s in steps):
            warnings.append(f"{file}: {missing} step(s) have no image (image_path null: the run could not save it)")
        traj = Trajectory(id=episode_id(doc, file), instruction=require(meta, "task_goal", file, rec), steps=steps,
                          answer=answer, platform="android", task_id=own_id(meta.get("task_name")),
                          label=label(meta, steps[-1].action_type if steps else None, file, warnings),
                          source=str(file))
        return check_nonempty(traj, file, rec)


def load_episodes(path: Path, image_roots: Roots, parse_one: Callable, foreign: Callable[[dict], bool],
                  skipped: str) -> LoadResult:
    """Every episode.json of `path` (a file, or a folder, which bounds where screenshots may lie with
    `image_roots`) parsed by `parse_one(doc, file, roots, warnings)`; in a folder, an episode of the other
    ClawGUI format (`foreign(doc)`) is skipped with the warning `skipped`."""
    path = Path(path)
    roots = tuple(dict.fromkeys(Path(r).resolve() for r in (path.parent if path.is_file() else path, *image_roots)))
    result = LoadResult()
    for f in episode_files(path):
        with result.catching(f.parent.name):
            doc = load_json(f)
            if path.is_dir() and isinstance(doc, dict) and foreign(doc):
                result.warnings.append(f"{f}: {skipped}")
            else:
                result.trajectories.append(parse_one(doc, f, roots, result.warnings))
    return result


def load(path: Path, check_images: bool = True, image_roots: Roots = ()) -> LoadResult:
    """Load one ClawGUI-RL `episode.json` or every one under a folder (an episode root such as
    `clawgui-rl/episode/`); the folder given bounds where screenshots may lie, with `image_roots`."""
    return load_episodes(path, image_roots, lambda doc, f, roots, warns: parse(doc, f, check_images, roots, warns),
                         lambda doc: "meta_data" not in doc and "task_name" in doc,
                         "a ClawGUI phone-agent episode, not ClawGUI-RL; skipped it (read it with --format "
                         "clawgui-agent)")
