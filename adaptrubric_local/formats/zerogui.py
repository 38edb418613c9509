"""Load ZeroGUI evaluation/rollout folders (UI-TARS agent on OSWorld or AndroidLab).

Read from the writer, OpenGVLab/ZeroGUI (commit d3d7be2b325d), `openrlhf/trainer/ray/vllm_agent_engine.py`
`run_single_task`:
- L85-91: one folder per task, `{save_dir}/{%Y%m%d%H%M%S}_{example_id}/`; L95-105: when the env
  reset fails, only `result.txt` = `Env reset failed.` is written (no `traj.jsonl`: not loaded, a
  warning names it);
- L107-111: `step_0.png` (the initial screen) and `config.json` (the task config, with `instruction`);
- L135-142: `model_output.jsonl` (every reply, parsed or not); L150-171: per executed action, the
  screen `env.step` leaves is saved as `step_{n}.png` and a `traj.jsonl` row written with `step_num`,
  `action` (the pyautogui code), `reward`, `done`, `info`, `screenshot_file`, `input_text`,
  `output_text` (the model's reply, "Thought: ... Action: ..."); the actions of one reply share a
  `step_num` and its `step_{n}.png`;
- L177-189: `result.txt` holds the reward, or -1 when a step failed (the VM gave no screen), and
  `eval.json` the evaluator's output.
`openrlhf/agent/uitars.py`: L171-195 (`parse_action_qwen2vl`) splits a reply into the Thought (or
Reflection/Action_Summary) and the Action after the last `Action:`; L398-413 put the thought in a
docstring at the top of the pyautogui code; L571-572 turn `finished(...)` into the code `DONE`, so
the answer (`finished(content='...')`) is only in `output_text`.

So: `step_N.png` is the screen AFTER action N (`SCREENS = "after"`); the loader pairs each action with
the screen it was taken on (`step_0.png` for the first) and keeps the last screen as a final step.
One step per reply: action text, type, typed text and answer come from the Action part of
`output_text` (the row's code when there is none), the thought from its Thought part. Label:
`result.txt` > 0.5 is 1, else 0; -1 (a failed step or evaluation) is label None with a warning, not
0. Platform: `platform=` when given, else `android` for an AndroidLab task config (it has `task_id`),
else `ubuntu` (OSWorld). Not read: `eval.json`, `model_output.jsonl`, `input_text`, `reward`.
"""
from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from ..types import Step, Trajectory
from .actions_text import classify_code_action, gather
from .base import DataError, LoadResult, Roots, check_nonempty, load_json, resolve_image
from .osworld import load_runs, read_score
from .screens import after_to_before

SCREENS = "after"
_THOUGHT = re.compile(r"(?:Thought|Reflection|Action_Summary):\s*(.*?)(?=\s*(?:Action_Summary:|Action:)|\Z)", re.S)


def split_reply(text: str) -> tuple[str | None, str | None]:
    """(thought, action) of a UI-TARS reply: the Thought part and what follows the last `Action:`."""
    thoughts = [m.group(1).strip() for m in _THOUGHT.finditer(text) if m.group(1).strip()]
    action = text.rsplit("Action:", 1)[1].strip() if "Action:" in text else None
    return ("\n".join(thoughts) or None), action or None


def reply_step(shot: str | None, rows: list[dict]) -> tuple[Step, str | None]:
    """One Step for the rows of one reply (they share `output_text` and the screenshot)."""
    reply = rows[0].get("output_text")
    thought, action = split_reply(reply) if isinstance(reply, str) else (None, None)
    if action is None:
        action = "\n".join(str(r.get("action", "")) for r in rows)
    atype, text, answer = classify_code_action(action)
    return Step(screenshot=shot, action=action, action_type=atype, text=text, thought=thought), answer


def _label(folder: Path, warnings: list[str]) -> int | None:
    result = folder / "result.txt"
    if not result.is_file():
        return None
    score, raw = read_score(result, "the reward", f"folder {folder.name}")
    if score < 0:
        warnings.append(f"{result}: {raw} (ZeroGUI writes -1 when a step or the evaluation failed): label left "
                        "empty, not 0")
        return None
    return int(score > 0.5)


def _read(folder: Path, tid: str, rows: list[dict], roots: tuple, warnings: list[str], check: bool,
          platform: str | None) -> Trajectory:
    file, rec = folder / "traj.jsonl", f"folder {folder.name}"
    if not (folder / "config.json").is_file():
        raise DataError(file, "no config.json beside traj.jsonl (ZeroGUI writes the task config, with its "
                        "instruction, there)", rec, "instruction")
    config = load_json(folder / "config.json")
    if not isinstance(config, dict) or not isinstance(config.get("instruction"), str):
        raise DataError(folder / "config.json", "task config has no string 'instruction'", rec, "instruction")
    replies: dict = {}
    for i, r in enumerate(rows):
        replies.setdefault(r.get("step_num", i + 1), []).append(r)
    shots = {n: resolve_image(folder, group[-1].get("screenshot_file") or f"step_{n}.png", file, f"step_num {n}",
                              "screenshot_file", check, roots) for n, group in replies.items()}
    steps, answer = gather(reply_step(shots[n], group) for n, group in replies.items())
    initial = (resolve_image(folder, "step_0.png", file, "step 0", "step_0.png", check, roots)
               if (folder / "step_0.png").is_file() else None)
    traj = Trajectory(id=tid, instruction=config["instruction"], steps=after_to_before(initial, steps),
                      answer=answer, platform=platform or ("android" if "task_id" in config else "ubuntu"),
                      task_id=str(config.get("id") or config.get("task_id") or folder.name),
                      label=_label(folder, warnings), source=str(file))
    return check_nonempty(traj, file, rec)


def load(path: Path, check_images: bool = True, image_roots: Roots = (), platform: str | None = None) -> LoadResult:
    """Load every ZeroGUI task folder under `path` (the save dir, one task folder, or its traj.jsonl);
    `platform` overrides the one read off each task config."""
    result = LoadResult(warnings=[
        f"{f}: {f.read_text(encoding='utf-8').strip()!r} and no traj.jsonl: the task never ran; not loaded"
        for f in sorted(Path(path).glob("*/result.txt"))
        if Path(path).is_dir() and not (f.parent / "traj.jsonl").exists()])
    result.extend(load_runs(path, tuple(image_roots), partial(_read, check=check_images, platform=platform)))
    return result
