"""Load OSWorld result folders (and runs in its layout: Windows Agent Arena, OpenCUA's runner).

Read from the writer, xlang-ai/OSWorld as forked in pkueecszc/OSWorld (commit eac51b51d3e6):
- `run.py` L159-168: the task is `{test_config_base_dir}/examples/{domain}/{example_id}.json`
  (default `evaluation_examples`, L90) and its `instruction` is the instruction; L178-186: results go
  to `{result_dir}/{action_space}/{observation_type}/{model}/{domain}/{example_id}/` (default
  `./results`, L107); L204-207: a run that raised (the time limit) appends `{"Error": "Time limit
  exceeded in {domain}/{example_id}"}` to `traj.jsonl` and writes no `result.txt`.
- `lib_run_single.py` L10-53 (`run_single_example`): per action, `env.step` runs first and the
  screen it leaves is saved as `step_{n}_{%Y%m%d@%H%M%S}.png` (L30), then a `traj.jsonl` row
  `step_num, action_timestamp, action, reward, done, info, screenshot_file` (L33-41); several actions
  of one prediction share a `step_num`. `result.txt` holds the evaluator's score (L51).
- fxsc03/OSWorld-main-nex (commit cfe2c9ba11f8) `lib_run_single.py`: `run_single_example` and
  `run_single_example_opencua` also save the initial screen as `step_0.png` and add `response` (the
  model's reply; a dict for some agents) and `natural_language_action`; the OpenCUA runner saves
  `step_{n}.png` while its row names `step_{n}_{timestamp}.png`.

So: each `step_N*.png` is the screen AFTER action N (`SCREENS = "after"`); the loader pairs each action
with the screen it was taken on (`screens.after_to_before`: `step_0.png` when saved, else none for the
first action) and keeps the last screen as a final step. `response` is the thought (a dict's
`thought`/`reasoning`/`content`, else its JSON), `natural_language_action` is put before the code in
the action text. The instruction is read from the task JSON of the checkout the results folder lies in
(walking up to the folder holding `evaluation_examples/examples`; `examples=DIR` points elsewhere;
a task found under another domain folder is found by its id); with no checkout (or none holding the
task), rows that carry an `instruction` (some agents write one, e.g. `run_single_example_human`) give it,
else the `Instruction:` block of the run's `runtime.log` (`runtime_log.py`: how OSWorld's `setup_logger`
and the agent write it; OSReward's committed OSWorld samples are such folders), and the platform is
`windows` when the folder names below the data folder (or its own name) say Windows. Otherwise the
platform is `platform=` when given, else the task JSON's `platform`/`os`, else `windows` when the
examples folder or the task's domain path names Windows or the task's config uses `C:\\` paths, else
`ubuntu` (OSWorld's default VM).
Label: `result.txt` > 0.5 is 1, else 0; a run ending in an `{"Error": ...}` row with no `result.txt`
gets label None (it never reached the evaluator: not a failed task) and a warning naming the error.
Not read: `recording.mp4`, the rest of `runtime.log`, `info`, `reward`, accessibility trees.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ..types import Step, Trajectory
from .actions_text import code_step, gather, nonblank
from .base import DataError, LoadResult, Roots, check_nonempty, iter_json_lines, load_json, resolve_image, tag
from .runtime_log import instruction_from_runtime_log
from .screens import after_to_before

SCREENS = "after"
_THOUGHT_KEYS = ("reasoning_content", "thought", "reasoning", "thinking", "plan", "content", "response")
_WINDOWS_PATH = re.compile(r"\b[a-z]:\\\\", re.I)
Read = Callable[[Path, str, list[dict], tuple, list[str]], Trajectory]


def find_examples(folder: Path) -> Path | None:
    """`evaluation_examples/examples` of the checkout `folder` lies in (the nearest one above)."""
    found = (p / name / "examples" for p in (folder, *folder.parents)
             for name in ("evaluation_examples", "evaluation_examples_windows"))
    return next((examples for examples in found if examples.is_dir()), None)


def task_file(examples: Path, domain: str, example_id: str) -> Path | None:
    """The task JSON of `example_id`: `examples/{domain}/{id}.json`, else the one file of that name below."""
    direct = examples / domain / f"{example_id}.json"
    return direct if direct.is_file() else next(iter(sorted(examples.rglob(f"{example_id}.json"))), None)


def task_platform(task: dict, file: Path, examples: Path) -> str:
    """Windows or Ubuntu, from what the task JSON and where it lies say (see the module docstring)."""
    for key in ("platform", "os"):
        if isinstance(task.get(key), str) and task[key].strip():
            return task[key].strip().lower()
    named = any("windows" in part.lower() for part in [examples.parent.name, *file.relative_to(examples).parts[:-1]])
    return "windows" if named or _WINDOWS_PATH.search(json.dumps(task.get("config", []))) else "ubuntu"


def thought_of(response: Any) -> str | None:
    """The model's reply as the step's thought: a string as it is, a dict's thought-like field, else its JSON."""
    if isinstance(response, str):
        return response.strip() or None
    if isinstance(response, dict):
        for key in _THOUGHT_KEYS:
            if nonblank(response.get(key)):
                return response[key].strip()
    return json.dumps(response, ensure_ascii=False) if response else None


def _shot_name(folder: Path, row: dict, warn: list[str]) -> str | None:
    """The row's screenshot file, or the file the OpenCUA runner really saved (`step_{n}.png`)."""
    name = row.get("screenshot_file")
    if isinstance(name, str) and (folder / name).is_file():
        return name
    n = row.get("step_num")
    for alt in ([f"step_{n}_{row.get('action_timestamp')}.png", f"step_{n}.png"] if n is not None else []):
        if (folder / alt).is_file():
            if name and not any("OpenCUA runner" in w for w in warn):
                warn.append(f"{folder / 'traj.jsonl'}: step_num {n} names {name}, which does not exist; read "
                            f"{alt} (what OSWorld's OpenCUA runner saves; so for every such step)")
            return alt
    return name if isinstance(name, str) else None


def _task(folder: Path, tid: str, rows: list[dict], examples: Path | None, given: str) -> tuple[str, str]:
    """(instruction, platform) from the task JSON, else from rows that carry it or from runtime.log."""
    file, rec = folder / "traj.jsonl", f"folder {folder.name}"
    found = task_file(examples, folder.parent.name, folder.name) if examples is not None else None
    if found is None:
        instruction = (next((r["instruction"] for r in rows if isinstance(r.get("instruction"), str)), None)
                       or instruction_from_runtime_log(folder))
        if instruction is not None:  # the platform from the folder names between the data folder and the run
            return instruction, "windows" if "windows" in tid.lower() or "windows" in given.lower() else "ubuntu"
    if examples is None:
        raise DataError(file, "no instruction: OSWorld keeps it in evaluation_examples/examples/{domain}/"
                        f"{folder.name}.json of the checkout, and none was found above {folder} "
                        "(point to one with examples=DIR); no row carries one and no runtime.log holds "
                        "an 'Instruction:' block", rec, "instruction")
    if found is None:
        raise DataError(file, f"no task JSON {folder.name}.json under {examples}", rec, "instruction")
    task = load_json(found)
    if not isinstance(task, dict) or not isinstance(task.get("instruction"), str):
        raise DataError(found, "task JSON has no string 'instruction'", rec, "instruction")
    return task["instruction"], task_platform(task, found, examples)


def read_score(result: Path, what: str, rec: str) -> tuple[float, str]:
    """(the number a run's result.txt holds, its text); DataError naming `what` when it is not a number."""
    raw = result.read_text(encoding="utf-8").strip()
    try:
        return float(raw), raw
    except ValueError:
        raise DataError(result, f"expected {what} (a number), got {raw[:40]!r}", rec, "result.txt") from None


def _label(folder: Path, errors: list, warnings: list[str]) -> int | None:
    file, result = folder / "traj.jsonl", folder / "result.txt"
    if not result.is_file():
        if errors:
            warnings.append(f"{file}: the run ended with {{\"Error\": {str(errors[-1])[:80]!r}}} and has no "
                            "result.txt: it never reached the evaluator, so its label is left empty (not 0)")
        return None
    score, raw = read_score(result, "the evaluator's score", f"folder {folder.name}")
    if errors:
        warnings.append(f"{file}: an {{\"Error\": ...}} row follows an evaluated run; kept its score {raw}")
    return int(score > 0.5)


def _read(folder: Path, tid: str, rows: list[dict], roots: tuple, warnings: list[str], check: bool,
          examples: Path | None, platform: str | None, given: str) -> Trajectory:
    file, rec = folder / "traj.jsonl", f"folder {folder.name}"
    instruction, task_platform_ = _task(folder, tid, rows, examples or find_examples(folder), given)

    def step(r: dict) -> tuple[Step, str | None]:
        name = _shot_name(folder, r, warnings)
        shot = None if name is None else resolve_image(folder, name, file, f"step_num {r.get('step_num')}",
                                                       "screenshot_file", check, roots)
        step, ans = code_step(shot, r.get("action"), thought_of(r.get("response")))
        if nonblank(r.get("natural_language_action")):
            step.action = f"{r['natural_language_action'].strip()} [{step.action}]"
        return step, ans

    steps, answer = gather(step(r) for r in rows if "Error" not in r)
    initial = (resolve_image(folder, "step_0.png", file, "step 0", "screenshot_file", check, roots)
               if (folder / "step_0.png").is_file() else None)
    label = _label(folder, [r["Error"] for r in rows if "Error" in r], warnings)
    traj = Trajectory(id=tid, instruction=instruction, steps=after_to_before(initial, steps), answer=answer,
                      platform=platform or task_platform_, task_id=folder.name, label=label, source=str(file))
    return check_nonempty(traj, file, rec)


def load_runs(path: Path, image_roots: Roots, read: Read) -> LoadResult:
    """Every result folder under `path` (a results folder, one run, or its traj.jsonl), read by
    `read(folder, id, rows, roots, warnings)`; its id is the folder's path below the results folder, and
    screenshots may lie there or in `image_roots`. A bad traj.jsonl line or a row that is not an object is
    an error under that id: the trajectory is not read."""
    path = Path(path).parent if Path(path).name == "traj.jsonl" and Path(path).is_file() else Path(path)
    one = (path / "traj.jsonl").is_file()
    folders, root = ([path], path.parent) if one else (sorted(p.parent for p in path.rglob("traj.jsonl")), path)
    result = LoadResult()
    for folder in folders:
        tid = str(folder.relative_to(root)) if folder != root else folder.name
        part = LoadResult()
        rows = [obj for _, obj in iter_json_lines(folder / "traj.jsonl", part)]
        bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
        with part.catching(tid):
            if bad is not None and not part.errors:
                raise DataError(folder / "traj.jsonl", "step is not a JSON object", f"folder {folder.name}",
                                f"line {bad + 1}")
            if not part.errors:
                part.trajectories.append(read(folder, tid, rows, (root, *image_roots), part.warnings))
        part.errors = [tag(e, tid) for e in part.errors]
        result.extend(part)
    return result


def load(path: Path, check_images: bool = True, image_roots: Roots = (),
         examples: str | os.PathLike | None = None, platform: str | None = None) -> LoadResult:
    """Load every OSWorld result folder under `path`. `examples`: the `evaluation_examples/examples`
    folder holding the task JSONs (default: the one of the checkout `path` lies in); `platform`:
    the platform of every run (default: decided per task, see the module docstring)."""
    return load_runs(path, tuple(image_roots), partial(_read, check=check_images, platform=platform,
                                                       examples=Path(examples) if examples else None,
                                                       given=Path(path).resolve().name))
