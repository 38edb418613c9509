"""AgentRewardBench (McGill-NLP/agent-reward-bench, commit ea58fb5b; the same code is `agent-reward-bench`
0.1.2 on PyPI): web-agent trajectories from AgentLab/BrowserGym, as the Hub data set
`McGill-NLP/agent-reward-bench` lays them out once downloaded to `trajectories/` (README, "Loading dataset").

Read from the writer's code:
- `scripts/convert_trajectories_to_json.py` (L35-45): one JSON per trajectory,
  `cleaned/<benchmark>/<agent>/<experiment>/<task_id>.json`, the dict of
  `agent_reward_bench/trajectories.py` `Trajectory.to_dict` (L247-266: `benchmark`, `agent`, `model`, `valid`,
  `goal`, `summary_info`, ...) with `steps` from `Step.to_dict` (L539-572: `num`, `reasoning`, `action`,
  `screenshot_path`, `url`, `axtree`, ...). `screenshot_path` is `str(...)` of `get_image_path` (L517-536),
  so a missing image is the string "None".
- `scripts/clean_processed_trajectories.py` (L29-46): screenshots copied to
  `trajectories/screenshots/<benchmark>/<agent>/<json stem>/screenshot_step_<n>.png`, and that path,
  relative to the folder holding `trajectories/`, written back. The loader resolves it from the `screenshots`
  part on, inside the folder that holds `cleaned/` and `screenshots/`, so a moved or renamed copy loads.
- Screenshot timing: BrowserGym's step n holds the observation the agent acted on at step n, so each
  screenshot is the screen BEFORE its action; AgentLab's last step (action None) is the final screen.
- `scripts/run_judge.py` (L122-125) skips trajectories with `valid` false: so does this loader (warning).
- Labels: `agent_reward_bench/data/annotations.csv` (shipped in the package): `benchmark`, `task_id`,
  `model_name` (the agent), `trajectory_success` "Successful"/"Unsuccessful" (1/0; "Unsure" is no label). A
  trajectory annotated twice takes the first row, the primary annotator (`judge/utils.py`
  `infer_annotator_type`, L151-165). The loader reads `<root>/annotations.csv` when there is one, else the
  installed `agent_reward_bench` package's file (located without importing the package).

The answer is the text of BrowserGym's `send_msg_to_user(...)` (or `report_infeasible(...)`); `fill(bid,
text)` is typed text. Not read: the accessibility trees, chat messages and the `judgments/` folder.
"""
from __future__ import annotations

import ast
import csv
import importlib.util
import os
from pathlib import Path
from typing import Any

from ..types import Step, Trajectory
from .actions_text import described_step, gather, step_objects
from .base import LoadResult, Roots, check_nonempty, load_json, require, resolve_image
from .detect import peek_json

_SUCCESS = {"successful": 1, "unsuccessful": 0}
_KINDS = {"click": "tap", "dblclick": "tap", "fill": "type", "scroll": "scroll", "goto": "navigate",
          "go_back": "navigate", "go_forward": "navigate", "new_tab": "navigate", "tab_focus": "navigate",
          "keyboard_press": "key", "press": "key", "select_option": "select", "hover": "hover", "noop": "wait",
          "send_msg_to_user": "answer", "report_infeasible": "answer"}


def find_root(p: Path) -> Path:
    """The folder holding `cleaned/` (and `screenshots/`): `p` itself, or the one above a `cleaned` part."""
    p = p.resolve()
    if (p / "cleaned").is_dir():
        return p
    return next((parent.parent for parent in [p, *p.parents] if parent.name == "cleaned"), p)


def is_agentrewardbench(p: Path) -> bool:
    """A `cleaned/` folder of AgentRewardBench JSON, or a file/folder inside one."""
    if p.is_file():
        return p.suffix == ".json" and "cleaned" in p.resolve().parts
    root = find_root(p)
    first = next((root / "cleaned").rglob("*.json"), None) if (root / "cleaned").is_dir() else None
    obj = peek_json(first) if first else None
    return isinstance(obj, dict) and {"goal", "steps", "benchmark"} <= set(obj)


def _package_annotations() -> Path | None:
    spec = importlib.util.find_spec("agent_reward_bench")
    found = (Path(loc) / "data" / "annotations.csv" for loc in (spec.submodule_search_locations or [] if spec else []))
    return next((f for f in found if f.is_file()), None)


def read_annotations(path: Path) -> dict[tuple[str, str, str], int | None]:
    """{(benchmark, agent, task_id): label} from annotations.csv, the first (primary) row of each; a
    trajectory_success other than Successful/Unsuccessful ("Unsure") is None."""
    out: dict[tuple[str, str, str], int | None] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            key = (row.get("benchmark", ""), row.get("model_name", ""), row.get("task_id", ""))
            out.setdefault(key, _SUCCESS.get((row.get("trajectory_success") or "").strip().lower()))  # "Unsure": None
    return out


def describe(action: Any) -> tuple[str, str | None, str | None, str | None]:
    """(action text, action_type, typed text, answer) of one BrowserGym action string."""
    if not isinstance(action, str) or not action.strip():
        return "(final screen)", "observe", None, None
    try:
        call = ast.parse(action.strip().splitlines()[0], mode="eval").body
    except SyntaxError:
        return action, None, None, None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return action, None, None, None
    name = call.func.id
    args = [a.value for a in call.args if isinstance(a, ast.Constant)]
    kind = _KINDS.get(name)
    text = str(args[1]) if name == "fill" and len(args) > 1 else None
    answer = str(args[0]) if kind == "answer" and args else None
    return action, kind, text, answer


def _trajectory(obj: dict, file: Path, root: Path, labels: dict, check: bool, roots: tuple) -> Trajectory:
    rec = file.stem
    goal = require(obj, "goal", file, rec)

    def step(i: int, s: dict) -> tuple[Step, str | None]:
        raw = s.get("screenshot_path")
        parts = Path(str(raw)).parts  # from the `screenshots` part on: a moved or renamed copy loads
        rel = Path(*parts[parts.index("screenshots"):]) if "screenshots" in parts else Path(str(raw))
        shot = (None if raw in (None, "None", "") else
                resolve_image(root, str(rel), file, f"{rec} step {s.get('num', i)}", "screenshot_path", check, roots))
        step, said = described_step(shot, describe(s.get("action")),
                                    s.get("reasoning") if isinstance(s.get("reasoning"), str) else None)
        return step, said or None

    steps, answer = gather(step(i, s) for i, s in step_objects(obj, "steps", file, rec, "step is not a JSON object"))
    benchmark, agent = str(obj.get("benchmark", "")), str(obj.get("agent", ""))
    traj = Trajectory(id=f"{benchmark}/{agent}/{rec}", instruction=goal.strip(), steps=steps, answer=answer,
                      platform="web", task_id=rec, label=labels.get((benchmark, agent, rec)), source=str(file))
    return check_nonempty(traj, file, rec)


def _in_cleaned(f: Path, root: Path) -> bool:
    return f.resolve().is_relative_to(root / "cleaned")


def _path_id(f: Path, root: Path) -> str:
    """benchmark/agent/task_id from the file's place below cleaned/ (the id its trajectory would have)."""
    rel = f.resolve().relative_to(root / "cleaned").parts if _in_cleaned(f, root) else ()
    return f"{rel[0]}/{rel[1]}/{f.stem}" if len(rel) >= 3 else f.stem


def load_agentrewardbench(path: str | os.PathLike, check_images: bool = True, image_roots: Roots = (),
                          annotations: str | os.PathLike | None = None) -> LoadResult:
    """Every trajectory JSON under `path` (the downloaded `trajectories/`, its `cleaned/`, or below), with
    the labels of `annotations` (default: `<root>/annotations.csv`, else the installed package's)."""
    p = Path(path)
    root, result = find_root(p), LoadResult()
    ann = Path(annotations) if annotations else root / "annotations.csv"
    ann = ann if ann.is_file() else _package_annotations()
    if ann is None:
        result.warnings.append("no annotations.csv (pip install agent-reward-bench, or put it in "
                               f"{root}): trajectories are unlabelled")
    labels = read_annotations(ann) if ann else {}
    files = [p] if p.is_file() else [f for f in sorted(p.rglob("*.json")) if _in_cleaned(f, root)]
    for f in files:
        with result.catching(_path_id(f, root)):
            obj = load_json(f)
            if isinstance(obj, dict) and obj.get("valid") is False:
                result.warnings.append(f"{f}: valid is false (an incomplete AgentLab run, which run_judge.py skips); "
                                       "skipped it")
                continue
            traj = _trajectory(obj, f, root, labels, check_images, (root, *image_roots))
            if traj.label is None and labels.get((str(obj.get("benchmark")), str(obj.get("agent")), f.stem), 0) is None:
                result.warnings.append(f"{ann}: {traj.id} is annotated neither Successful nor Unsuccessful "
                                       "(Unsure); loaded unlabelled")
            result.trajectories.append(traj)
    return result


REGISTRATION = {"order": 15, "detect": is_agentrewardbench, "shape": "cleaned/**/*.json (AgentRewardBench)",
                "looked_for": "cleaned/<benchmark>/<agent>/<experiment>/<task_id>.json (AgentRewardBench) below"}

__all__ = ["describe", "find_root", "is_agentrewardbench", "load_agentrewardbench", "read_annotations"]
