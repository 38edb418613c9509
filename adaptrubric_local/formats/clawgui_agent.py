"""ClawGUI's phone agent traces, read as ZJU-REAL/ClawGUI writes them (commit d990d3e):

- `clawgui-agent/phone_agent/tracer.py` L15-32, L49-61, L86-114 (`GUITracer`): `<trace_dir>/<episode_id>/`
  (an 8-hex id) holding `episode.json` = `{"task_name", "timestamp", "episode": [{"step", "model_output",
  "action", "finished"}]}` and `images/step{k}.png` for step k (no path is written: it is implied).
  `end_task(result, ...)` takes the outcome but writes nothing of it: a trace has NO label (give one with
  `--labels`). The file is written only when the task ends; a killed run leaves images and no episode.json.
- `clawgui-agent/phone_agent/agent.py` L361-365: the step counter (from 1) is raised and the screenshot taken
  before the model acts, L696-707 records it with that step's action: `SCREENS = "before"`.
- `action` is a dict (agent.py L568-592; `phone_agent/actions/handler.py` L357-518): `_metadata` "do" or
  "finish"; AutoGLM actions name the action in `action` ("Tap", "Type" with `text`, "Launch" with `app`,
  ...), the other model handlers in `action_type` with their parameters (`text` or `content` for typing);
  a finish carries `message`, read as the answer.
- `model_output` is the raw model text; the thought is what comes before the action, split as
  `phone_agent/model/client.py` L195-255 splits it (before `<tool_call>`, `<answer>`, `finish(message=` or
  `do(action=`).

The instruction is `task_name`; the id is the episode folder's name. Platform: android (the tracer does not
say whether the device was an ADB or an HDC one). Not read: `timestamp`, `finished`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..types import Trajectory
from . import tool_calls
from .actions_text import described_step, gather, nonblank
from .base import DataError, LoadResult, Roots, check_nonempty, require, resolve_image, tagged
from .clawgui import load_episodes, peek_episodes

SCREENS = "before"
SHAPE = "episode.json with task_name (ClawGUI phone agent)"
LOOKED_FOR = "episode.json files with task_name and episode[] (ClawGUI phone agent) anywhere below"
_TYPE_NAMES = {"type", "type_name", "input_text", "input"}
_KINDS = {"tap": "tap", "click": "tap", "double tap": "double_click", "long press": "long_press", "swipe": "swipe",
          "launch": "open_app", "open": "open_app", "back": "back", "home": "home", "wait": "wait"}
_MARKERS = ("<tool_call>", "<answer>", "finish(message=", "do(action=")


def detect(p: Path) -> bool:
    """An episode.json (or a folder holding them) with `task_name` and `episode` and no `meta_data`."""
    return any("task_name" in d and "episode" in d and "meta_data" not in d for d in peek_episodes(p))


def thought(output: Any) -> str | None:
    """The text before the action in a raw model output (client.py's split), or None."""
    marker = next((m for m in _MARKERS if m in output), None) if isinstance(output, str) else None
    return tool_calls.thought_before(output, marker) if marker else None


def describe(action: Any) -> tuple[str, str | None, str | None, str | None]:
    """(action text, action_type, typed text, answer) for one recorded action dict."""
    if not isinstance(action, dict):
        return json.dumps(action, ensure_ascii=False), None, None, None
    if action.get("_metadata") == "finish":
        msg = nonblank(action.get("message"))
        return f"finish(message={json.dumps(msg, ensure_ascii=False)})", "answer", None, msg
    name = str(action.get("action") or action.get("action_type") or "unknown")
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in action.items()
                     if k not in ("action", "action_type", "_metadata"))
    typed = action.get("text", action.get("content")) if name.lower() in _TYPE_NAMES else None
    kind = "type" if typed is not None else _KINDS.get(name.lower(), name.lower().replace(" ", "_"))
    return f"{name}({args})", kind, typed if isinstance(typed, str) else None, None


def _step(s: Any, i: int, file: Path, rec: str, check: bool, roots: tuple):
    if not isinstance(s, dict) or isinstance(s.get("step"), bool) or not isinstance(s.get("step"), int):
        raise DataError(file, "step must be an object with an integer 'step'", rec, f"episode[{i}]")
    shot = resolve_image(file.parent, f"images/step{s['step']}.png", file, rec,
                         f"episode[{i}] (images/step{s['step']}.png)", check, roots)
    return described_step(shot, describe(s.get("action")), thought(s.get("model_output")))


def parse(doc: Any, file: Path, check_images: bool, roots: tuple) -> Trajectory:
    """One phone-agent `episode.json` -> Trajectory; a DataError carries the episode folder's name."""
    rec = f"episode {file.parent.name}"
    with tagged(file.parent.name):
        episode = require(doc, "episode", file, rec, list)
        steps, answer = gather(_step(s, i, file, rec, check_images, roots) for i, s in enumerate(episode))
        traj = Trajectory(id=file.parent.name, instruction=require(doc, "task_name", file, rec), steps=steps,
                          answer=answer, platform="android", source=str(file))
        return check_nonempty(traj, file, rec)


def load(path: Path, check_images: bool = True, image_roots: Roots = ()) -> LoadResult:
    """Load one phone-agent `episode.json` or every one under a folder (the tracer's `trace_dir`)."""
    return load_episodes(path, image_roots, lambda doc, f, roots, _: parse(doc, f, check_images, roots),
                         lambda doc: "meta_data" in doc,
                         "a ClawGUI-RL episode, not a phone-agent trace; skipped it (read it with --format clawgui)")
