"""Online-Mind2Web (OSU-NLP-Group/Online-Mind2Web): one folder per task, as its evaluator reads them.

Read from the reader's code and the repository's data notes:
- `src/run.py` (commit ccdeb0d6, `auto_eval` L28-74): `<trajectories_dir>/<task_id>/result.json` and
  `<task_id>/trajectory/` screenshots. Two schemas:
  - v1: `task`, `task_id`, `action_history` (strings), `thoughts`, `final_result_response`; the
    screenshots are every file of `trajectory/` sorted by the first number in its name (L69-71).
  - v2 (`schema_version` "online-mind2web-v2"): `action_history[]` of `{step, screenshot, url, action,
    action_status, thought}` (`screenshot` a file name in `trajectory/`), `agent_final_answer`.
- Screenshot timing: `data/schema_v2/README.md` (§1: "screenshot 0007.png is the state right before
  action #7"), so each screenshot is the screen BEFORE its action; v1 pairs them by position too (its §8),
  and a screenshot past the last action is the final screen.
- Human labels: `data/evaluation_results/online_mind2web_evaluation_results/human_label.json` (read from the
  copy in unclevikram/TripMind at 767535e9; `data/README.md`): a list of `{task_id, confirmed_task,
  "<Agent>_human_label": "0"|"1"|"2"}`. "2" is not executable (CAPTCHA, site down, agent bug): not a
  failure of the task, so the trajectory loads unlabelled and a warning counts it. The loader takes the
  file given (`labels=`) or a `human_label.json` in the folder or up to three folders above, and the
  agent given (`agent=`) or the one whose column name matches the trajectories folder's name
  (`Browser_Use` -> `Browser_Use_human_label`); with neither it warns and leaves the labels out.

Every trajectory is a web one (`platform` "web"); its id is its task folder's name. Typed text is read
from `TYPE: text` (v1's SeeAct-style actions) and `text="..."` (v2's compact grammar). Not read:
`input_image_paths`, `reference_length`, URLs.
"""
from __future__ import annotations

import os
import re
from itertools import zip_longest
from pathlib import Path
from typing import Any

from ..types import Step, Trajectory
from .base import DataError, LoadResult, Roots, check_nonempty, load_json, require, resolve_image

V2 = "online-mind2web-v2"
LABEL_FILE = "human_label.json"
_VERB = re.compile(r"\b(CLICK|TYPE|SCROLL|HOVER|WAIT|PRESS_KEY|PRESS ENTER|SELECT|GO_BACK|GO_FORWARD|REFRESH|"
                   r"NAVIGATE|TASK_COMPLETE|click_at|type_at|scroll|hover|press_key|select_option|navigate|go_back)\b")
_KINDS = {"click": "tap", "type": "type", "scroll": "scroll", "hover": "hover", "wait": "wait", "press_key": "key",
          "press enter": "key", "select": "select", "select_option": "select", "go_back": "navigate",
          "go_forward": "navigate", "refresh": "navigate", "navigate": "navigate", "task_complete": "answer",
          "click_at": "tap", "type_at": "type"}
_TYPED = re.compile(r"(?:->\s*TYPE:\s*(.+?)\s*(?:\|\s*(?:SUCCESS|FAILED))?$|text=\"((?:[^\"\\]|\\.)*)\")", re.S)


def is_online_mind2web(p: Path) -> bool:
    """A task folder (`result.json` beside `trajectory/`) or a folder of them."""
    if p.is_file():
        return p.name == "result.json" and (p.parent / "trajectory").is_dir()
    return ((p / "result.json").is_file() and (p / "trajectory").is_dir()) or any(
        (d / "trajectory").is_dir() for d in p.glob("*/") if (d / "result.json").is_file())


def classify(action: str) -> tuple[str | None, str | None]:
    """(action_type, typed text) of one Online-Mind2Web action string."""
    verb = _VERB.search(action)
    typed = _TYPED.search(action)
    return (_KINDS.get(verb.group(1).lower()) if verb else None,
            (typed.group(1) or typed.group(2)) if typed else None)


def _steps(obj: dict, folder: Path, file: Path, check: bool, roots: tuple, warnings: list[str]) -> list[Step]:
    shots_dir, rec = folder / "trajectory", folder.name
    history = require(obj, "action_history", file, rec, list)
    if obj.get("schema_version") == V2:
        entries = [(require(h, "screenshot", file, f"{rec} step {i}"), h.get("action"), h.get("thought"))
                   for i, h in enumerate(history)]
    else:
        if not shots_dir.is_dir():
            raise DataError(file, f"no screenshot folder {shots_dir}", rec, "trajectory")
        names = sorted((f.name for f in shots_dir.iterdir() if f.is_file()),  # by the first number in the name
                       key=lambda name: int(m.group()) if (m := re.search(r"\d+", name)) else -1)
        thoughts = obj.get("thoughts") or []
        if len(names) not in (len(history), len(history) + 1):
            warnings.append(f"{file}: {len(names)} screenshots for {len(history)} actions; paired by position")
        entries = list(zip_longest(names, history, thoughts[:max(len(names), len(history))]))
    steps = []
    for i, (shot, action, thought) in enumerate(entries):
        path = resolve_image(shots_dir, shot, file, f"{rec} step {i}", "screenshot", check, roots) if shot else None
        kind, typed = classify(str(action)) if action is not None else ("observe", None)
        steps.append(Step(screenshot=path, action="(final screen)" if action is None else str(action), action_type=kind,
                          text=typed, thought=thought if isinstance(thought, str) and action is not None else None))
    return steps


def find_labels(folder: Path) -> Path | None:
    """human_label.json in `folder` or up to three folders above it."""
    return next((d / LABEL_FILE for d in [folder, *list(folder.resolve().parents)[:3]] if (d / LABEL_FILE).is_file()),
                None)


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "_", name.lower()).strip("_")


def read_labels(file: Path, agent: str | None, folder: Path, warnings: list[str]) -> dict[str, Any]:
    """{task_id: "0"|"1"|"2"} of one agent's column of human_label.json."""
    rows = load_json(file)
    if not isinstance(rows, list):
        raise DataError(file, "expected a JSON list of {task_id, <Agent>_human_label, ...}")
    columns = sorted({k for r in rows if isinstance(r, dict) for k in r if k.endswith("_human_label")})
    wanted = _norm(agent or folder.resolve().name)
    column = next((c for c in columns if _norm(c[: -len("_human_label")]) == wanted), None)
    if column is None:
        warnings.append(f"{file}: no human label column for agent {agent or folder.name!r} (columns: "
                        f"{', '.join(columns)}); give agent=...; trajectories are unlabelled")
        return {}
    return {str(r.get("task_id")): r.get(column) for r in rows if isinstance(r, dict)}


def _label(value: Any, tid: str, warnings: list[str], file: Path) -> int | None:
    if value is None:
        return None
    if str(value).strip() == "2":
        warnings.append(f"{file}: task {tid}: human label 2 (not executable: CAPTCHA, site or agent failure), "
                        "not a task failure; loaded unlabelled")
        return None
    if str(value).strip() in ("0", "1"):
        return int(str(value).strip())
    raise DataError(file, f"human label must be 0, 1 or 2, got {value!r}", tid, "human_label")


def load_online_mind2web(path: str | os.PathLike, check_images: bool = True, image_roots: Roots = (),
                         labels: str | os.PathLike | None = None, agent: str | None = None) -> LoadResult:
    """Every `<task_id>/result.json` under `path` (a trajectories folder, or one task folder), labelled
    from human_label.json (see the module docstring)."""
    p = Path(path)
    p = p.parent if p.is_file() else p
    folders = [p] if (p / "result.json").is_file() else sorted(d for d in p.iterdir() if (d / "result.json").is_file())
    result = LoadResult()
    base = p.parent if folders == [p] else p
    label_file = Path(labels) if labels else find_labels(base)
    by_task = read_labels(label_file, agent, base, result.warnings) if label_file else {}
    for folder in folders:
        file = folder / "result.json"
        with result.catching(folder.name):
            obj = load_json(file)
            task = require(obj, "task", file, folder.name)
            steps = _steps(obj, folder, file, check_images, (folder, *image_roots), result.warnings)
            answer = obj.get("agent_final_answer" if obj.get("schema_version") == V2 else "final_result_response")
            tid = str(obj.get("task_id") or folder.name).removeprefix("tasks/")  # v1 ids were written both ways
            traj = Trajectory(id=folder.name, instruction=task, steps=steps, answer=answer, platform="web",
                              task_id=tid, label=_label(by_task.get(tid), tid, result.warnings, label_file or file),
                              source=str(file))
            result.trajectories.append(check_nonempty(traj, file, folder.name))
    return result


REGISTRATION = {"order": 16, "detect": is_online_mind2web, "shape": "<task_id>/result.json (Online-Mind2Web)",
                "looked_for": "<task_id>/result.json beside <task_id>/trajectory/ (Online-Mind2Web)"}

__all__ = ["classify", "find_labels", "is_online_mind2web", "load_online_mind2web", "read_labels"]
