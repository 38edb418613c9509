"""OSReward's AndroidWorld trajectories: one JSONL line per task, as OS-Copilot/OSReward commits them
(`benchmarking_analysis/data/raw/androidworld/aw-sample/results/aw-sample.jsonl` at c580376) and reads them
(`benchmarking_analysis/benchmark_analysis/adapters.py` `androidworld_records`, the last function of the
file at c580376):

- a line: `task_name`, `goal` (the instruction), `save_dir` (`<agent>/<task>`, the trajectory's id, else
  `task_name`), `task_success` (1 success, 0 failure; anything else is no label, as the adapter reads it:
  an unfinished or unevaluated run is not a failure), `trajectory[]` with `step`, `screenshot_path`
  (`<agent>/<task>/screenshot_step{k}.png`, relative to the folder that holds `results/`: two levels
  above the JSONL), `thought`, `action` (a one-line summary, JSON-quoted), `tool_call` (JSON text of a
  `mobile_use` call: `formats.tool_calls`), `response`, `step_history`.
- `SCREENS = "before"`: the adapter draws each step's click point on that step's screenshot, and
  `screenshot_step0.png` is the screen the first action was chosen on.

The folder a user has is the one that holds `results/` (or `results/` itself, or one JSONL file).
The step's action is the tool call (`click(coordinate=[179, 1097])`) followed by its summary after
` # `; `type` gives typed text, `answer` the answer. Platform: android. Not read: `response` (the thought
and call are read from their own fields), `step_history`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..types import Step, Trajectory
from . import tool_calls
from .actions_text import described_step, gather, nonblank, step_objects
from .base import DataError, LoadResult, Roots, check_nonempty, iter_json_lines, own_id, require, resolve_image, tagged
from .detect import peek_json

SCREENS = "before"
SHAPE = "results/*.jsonl with goal and trajectory (OSReward AndroidWorld)"
LOOKED_FOR = ("JSONL lines with goal, task_success and trajectory[] (OSReward AndroidWorld), in the folder or "
              "its results/")


def is_line(obj: Any) -> bool:
    """Whether a JSON object is one of these lines (a goal and a trajectory list)."""
    return isinstance(obj, dict) and "goal" in obj and isinstance(obj.get("trajectory"), list)


def jsonl_files(p: Path) -> list[Path]:
    """The JSONL files of this shape: `p` itself, or those in `p` or in `p/results/`."""
    cands = [p] if p.is_file() else sorted(p.glob("*.jsonl")) + sorted((p / "results").glob("*.jsonl"))
    return [f for f in cands if f.is_file() and is_line(peek_json(f, line=True))]


def detect(p: Path) -> bool:
    """A JSONL file of these lines, or a folder holding one (itself or in `results/`)."""
    return (p.suffix == ".jsonl" or not p.is_file()) and bool(jsonl_files(p))


def label(value: Any, file: Path, rec: str, warnings: list[str]) -> int | None:
    """`task_success` 1/0 as a label; anything else (null, a partial score) is no label, with a warning."""
    if isinstance(value, bool) or value not in (0, 1):
        if value is not None:
            warnings.append(f"{file}, {rec}: task_success {value!r} is neither 1 nor 0: no label")
        return None
    return int(value)


def step_of(s: dict, shot: str | None) -> tuple[Step, str | None]:
    """One trajectory step and the answer it submits, if any."""
    summary = s.get("action").strip().strip('"') if isinstance(s.get("action"), str) else ""
    args = tool_calls.arguments_of(s.get("tool_call"))
    described = (summary, None, None, None) if args is None else tool_calls.describe(args)
    if args is not None and summary:
        described = (f"{described[0]} # {summary}", *described[1:])
    return described_step(shot, described, nonblank(s.get("thought")))


def parse(obj: Any, file: Path, rec: str, check: bool, roots: tuple, warnings: list[str]) -> Trajectory:
    """One line -> Trajectory (screenshots relative to `roots[0]`); a DataError carries its id."""
    tid = (own_id(obj.get("save_dir")) or own_id(obj.get("task_name"))) if isinstance(obj, dict) else None

    def shot(i: int, rel: Any) -> str | None:
        return (resolve_image(roots[0], rel, file, rec, f"trajectory[{i}].screenshot_path", check, roots)
                if isinstance(rel, str) and rel else None)

    with tagged(tid):
        steps, answer = gather(step_of(s, shot(i, s.get("screenshot_path")))
                               for i, s in step_objects(obj, "trajectory", file, rec))
        if tid is None:
            raise DataError(file, "required field missing (neither save_dir nor task_name)", rec, "save_dir")
        traj = Trajectory(id=tid, instruction=require(obj, "goal", file, rec), steps=steps, answer=answer,
                          platform="android", task_id=own_id(obj.get("task_name")),
                          label=label(obj.get("task_success"), file, rec, warnings), source=str(file))
        return check_nonempty(traj, file, rec)


def load(path: Path, check_images: bool = True, image_roots: Roots = ()) -> LoadResult:
    """Load the JSONL files of a folder (or its `results/`), or one such file; each file's screenshots
    are taken from the folder two levels above it."""
    result = LoadResult()
    for f in jsonl_files(Path(path)):
        roots = (f.resolve().parent.parent, *image_roots)
        for rec, obj in iter_json_lines(f, result):
            with result.catching():
                result.trajectories.append(parse(obj, f, rec, check_images, roots, result.warnings))
    return result
