"""The ZeroGUI / OSWorld loader, mapped onto Trajectory/Step:

- ZeroGUI / OSWorld result folders: `traj.jsonl` (`step_num`, `action`, `screenshot_file`),
  `step_N*.png`, `result.txt` (the evaluator's score; > 0.5 is success). The instruction comes from
  `traj.jsonl` (`instruction`), a task JSON beside it (`instruction`), or `instruction.txt`.

A format's own file (`traj.jsonl`) given directly is read as its folder. Every
screenshot must lie in the data folder or one of the caller's `image_roots`; errors carry the id the
trajectory would have had (`DataError.record_id`).
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..types import Step, Trajectory
from .base import (
    DataError,
    LoadResult,
    check_nonempty,
    iter_json_lines,
    resolve_image,
    tag,
)

Roots = Iterable[str | os.PathLike]

_TYPE_RE = re.compile(r"(?:typewrite|write|type|input_text)\s*\(\s*(?:text\s*=\s*)?(['\"])(.*?)\1", re.S)
_ANSWER_RE = re.compile(r"(?:answer|finished|terminate|exit)\s*\(\s*(?:content|answer|message)?\s*=?\s*"
                        r"(['\"])(.*?)\1", re.S)


def _action_text(action: Any) -> str:
    return action if isinstance(action, str) else json.dumps(action, ensure_ascii=False)


def classify_code_action(action: str) -> tuple[str | None, str | None, str | None]:
    """(action_type, typed text, answer) read off a pyautogui/function-call action string."""
    m = _ANSWER_RE.search(action)
    if m:
        return "answer", None, m.group(2)
    m = _TYPE_RE.search(action)
    if m:
        return "type", m.group(2), None
    low = action.lower()
    for key, kind in (("hotkey", "hotkey"), ("press", "key"), ("scroll", "scroll"), ("drag", "drag"),
                      ("click", "tap"), ("tap", "tap"), ("swipe", "swipe"), ("wait", "wait"), ("done", "done")):
        if key in low:
            return kind, None, None
    return None, None, None


def code_step(shot: str, raw_action, thought) -> tuple[Step, str | None]:
    """A Step from a code-like action (pyautogui / function call), and the answer it submits, if any."""
    action = _action_text(raw_action or "")
    atype, text, answer = classify_code_action(action)
    return Step(screenshot=shot, action=action, action_type=atype, text=text,
                thought=thought if isinstance(thought, str) else None), answer


# ---------------------------------------------------------------- ZeroGUI / OSWorld
def _zerogui_instruction(folder: Path, rows: list[dict]) -> str | None:
    for r in rows:
        if isinstance(r.get("instruction"), str):
            return r["instruction"]
    if (folder / "instruction.txt").is_file():
        return (folder / "instruction.txt").read_text(encoding="utf-8").strip()
    for cand in sorted(folder.glob("*.json")):
        try:
            obj = json.loads(cand.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("instruction"), str):
            return obj["instruction"]
    return None


def load_zerogui_folder(folder: Path, root: Path, check_images: bool = True, image_roots: Roots = ()) -> LoadResult:
    """Load one OSWorld/ZeroGUI result folder holding `traj.jsonl`; its id is the folder's path
    below `root`."""
    result, file = LoadResult(), folder / "traj.jsonl"
    tid = str(folder.relative_to(root)) if folder != root else folder.name
    rows = [obj for _, obj in iter_json_lines(file, result)]
    if result.errors:
        result.errors = [tag(e, tid) for e in result.errors]
        return result
    try:
        result.trajectories.append(_zerogui_traj(folder, root, tid, rows, check_images, (root, *image_roots)))
    except DataError as exc:
        result.errors.append(tag(exc, tid))
    return result


def _zerogui_traj(folder: Path, root: Path, tid: str, rows: list, check_images: bool, roots: tuple) -> Trajectory:
    file, rec = folder / "traj.jsonl", f"folder {folder.name}"
    bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
    if bad is not None:
        raise DataError(file, "step is not a JSON object", rec, f"step {bad + 1}")
    instruction = _zerogui_instruction(folder, rows)
    if instruction is None:
        raise DataError(file, "no instruction in traj.jsonl, instruction.txt or a task JSON", rec, "instruction")
    steps, answer = [], None
    if (folder / "step_0.png").is_file():
        steps.append(Step(screenshot=resolve_image(folder, "step_0.png", file, rec, "step_0.png", True, roots),
                          action="(initial screen)", action_type="observe"))
    for i, r in enumerate(sorted(rows, key=lambda r: r.get("step_num", 0) or 0)):
        name = r.get("screenshot_file") or f"step_{r.get('step_num', i + 1)}.png"
        shot = resolve_image(folder, name, file, f"step_num {r.get('step_num', i + 1)}", "screenshot_file",
                             check_images, roots)
        step, ans = code_step(shot, r.get("action"), r.get("response"))
        steps.append(step)
        answer = ans if ans is not None else answer
    label = None
    if (folder / "result.txt").is_file():
        raw = (folder / "result.txt").read_text(encoding="utf-8").strip()
        try:
            label = int(float(raw) > 0.5)
        except ValueError:
            raise DataError(folder / "result.txt", f"expected a number, got {raw[:40]!r}", rec) from None
    traj = Trajectory(id=tid, instruction=instruction, steps=steps, answer=answer, platform="ubuntu",
                      task_id=folder.name, label=label, source=str(file))
    return check_nonempty(traj, file, rec)


def load_zerogui(path: Path, check_images: bool = True, image_roots: Roots = ()) -> LoadResult:
    """Load every `traj.jsonl` result folder under `path` (a folder, or one `traj.jsonl`)."""
    path = Path(path)
    if path.is_file() and path.name == "traj.jsonl":
        path = path.parent
    folders = [path] if (path / "traj.jsonl").is_file() else sorted(p.parent for p in path.rglob("traj.jsonl"))
    root = path.parent if folders == [path] else path
    result = LoadResult()
    for f in folders:
        result.extend(load_zerogui_folder(f, root, check_images, image_roots))
    return result
