"""Output folders laid out exactly as the agent projects' writer code lays them out (each builder cites the
lines it follows), for the loader tests. Every screenshot is a distinct PNG (`make_png` seeds)."""
from __future__ import annotations

import contextlib
import datetime
import gzip
import json
import pickle
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from conftest import make_png


def osworld_checkout(root: Path, domain: str, example_id: str, instruction: str, task_dir: str = "evaluation_examples",
                     **task) -> Path:
    """The task JSON run.py L159-168 (pkueecszc/OSWorld eac51b51) reads: {base}/examples/{domain}/{id}.json."""
    f = root / task_dir / "examples" / domain / f"{example_id}.json"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps({"id": example_id, "snapshot": domain, "instruction": instruction, "config": [],
                             **task}, indent="\t"))
    return f


def osworld_run(root: Path, domain: str, example_id: str, actions: list, model: str = "gpt-4o",
                result: str | None = "1.0", step0: bool = False, opencua: bool = False,
                timed_out: bool = False, extra: list[dict] | None = None, seed: int = 0) -> Path:
    """results/{action_space}/{observation_type}/{model}/{domain}/{id}/ as run.py L178-186 makes it, filled
    as lib_run_single.py L23-51 does: per action `step_{n}_{ts}.png` after env.step, a traj.jsonl row
    (L33-41); `step0`/`response`/`natural_language_action` as fxsc03/OSWorld-main-nex's runners write them;
    `opencua`: its OpenCUA runner saves `step_{n}.png` but records `step_{n}_{ts}.png`; `timed_out`: run.py
    L204-207's Error row and no result.txt. `extra[i]`: more keys for row i."""
    d = root / "results" / "pyautogui" / "screenshot" / model / domain / example_id
    d.mkdir(parents=True, exist_ok=True)
    if step0 or opencua:
        make_png(d / "step_0.png", seed)
    with open(d / "traj.jsonl", "a") as fh:
        for i, action in enumerate(actions):
            n, ts = i + 1, f"20250101@1200{i:02d}"
            make_png(d / (f"step_{n}.png" if opencua else f"step_{n}_{ts}.png"), seed + n)
            row = {"step_num": n, "action_timestamp": ts, "action": action, "reward": 0, "done": False,
                   "info": {}, "screenshot_file": f"step_{n}_{ts}.png", **((extra or [{}] * len(actions))[i])}
            fh.write(json.dumps(row) + "\n")
        if timed_out:
            fh.write(json.dumps({"Error": f"Time limit exceeded in {domain}/{example_id}"}) + "\n")
    if result is not None and not timed_out:
        (d / "result.txt").write_text(f"{result}\n", encoding="utf-8")
    return d


def osworld_runtime_log(run: Path, example_id: str, instruction: str, replies: list[str]) -> Path:
    """runtime.log as OSWorld's lib_run_single.py `setup_logger` opens it (fxsc03/OSWorld-main-nex
    cfe2c9ba11f8: a bare logging.FileHandler on `{example_result_dir}/runtime.log` for the logger
    `desktopenv.example.{id}`, no formatter), filled as the agent it is handed logs each prediction (the
    `Instruction:` and `Model Output:` blocks of OSReward's committed kimi-sample logs)."""
    import logging

    log = logging.getLogger(f"desktopenv.example.{example_id}")
    log.setLevel(logging.DEBUG)
    handler = logging.FileHandler(run / "runtime.log")
    log.addHandler(handler)
    try:
        log.info("=" * 26 + " %s " + "=" * 35, example_id)
        for reply in replies:
            log.info("Instruction: \n%s", instruction)
            log.info("Model Output: \n%s", reply)
    finally:
        log.removeHandler(handler)
        handler.close()
    return run / "runtime.log"


def zerogui_run(save_dir: Path, example_id: str, replies: list[tuple[str, list[str]]], config: dict,
                result: str = "1.0", seed: int = 0) -> Path:
    """One task folder as OpenGVLab/ZeroGUI (d3d7be2b) vllm_agent_engine.py `run_single_task` writes it:
    L85-91 the folder, L107-111 step_0.png and config.json (appended, indent 4), L135-142
    model_output.jsonl, L150-171 per executed action step_{n}.png and a traj.jsonl row, L177-189
    result.txt and eval.json. `replies`: (output_text, the pyautogui codes parsed from it)."""
    d = save_dir / f"20250102030405_{example_id}"
    d.mkdir(parents=True, exist_ok=True)
    make_png(d / "step_0.png", seed)
    with open(d / "config.json", "a") as f:
        json.dump(config, f, indent=4)
    for idx, (reply, codes) in enumerate(replies):
        with open(d / "model_output.jsonl", "a") as f:
            f.write(json.dumps({"step_num": idx + 1, "parsed_action": codes, "input_text": "<prompt>",
                                "output_text": reply}, ensure_ascii=False) + "\n")
        for code in codes:
            make_png(d / f"step_{idx + 1}.png", seed + idx + 1)
            with open(d / "traj.jsonl", "a") as f:
                f.write(json.dumps({"step_num": idx + 1, "action": code, "reward": 0.0, "done": code == "DONE",
                                    "info": {}, "screenshot_file": f"step_{idx + 1}.png", "input_text": "<prompt>",
                                    "output_text": reply}, ensure_ascii=False) + "\n")
    (d / "result.txt").write_text(f"{result}\n", encoding="utf-8")
    with contextlib.suppress(ValueError):  # not a reward: a failed reset (L95-105) leaves no eval.json
        (d / "eval.json").write_text(json.dumps({"reward": float(result)}, indent=4))
    return d


def uitars_code(thought: str, call: str) -> str:
    """The pyautogui code uitars.py L398-413 builds: the thought in a docstring, then the call."""
    return f"import pyautogui\nimport time\n'''\nObservation:\n\n\nThought:\n{thought}\n'''\n\n{call}"


def _android_world_module():
    """android_world.env.json_action with JSONAction's fields (json_action.py L80-115), so a pickle names
    the class exactly as AndroidWorld's does; removed again once the pickle is written."""
    mod = types.ModuleType("android_world.env.json_action")

    @dataclass
    class JSONAction:
        action_type: str | None = None
        index: str | int | None = None
        x: int | None = None
        y: int | None = None
        text: str | None = None
        direction: str | None = None
        goal_status: str | None = None
        app_name: str | None = None
        keycode: str | None = None
        clear_text: bool | None = None

    JSONAction.__module__ = mod.__name__
    JSONAction.__qualname__ = "JSONAction"
    mod.JSONAction = JSONAction
    return mod


def screen(seed: int, h: int = 24, w: int = 12) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)


def androidworld_task(run_dir: Path, name: str, goal: str, actions: list[dict], reasons: list[str],
                      success: float = 1.0, seed: int = 0) -> Path:
    """`{run_dir}/{name}.pkl.gz` as checkpointer.py L53-72/L118-129 writes it: a gzipped pickle of
    [episode], the episode as suite_utils.py L270-287 builds it, `episode_data` the dict of lists
    episode_runner.py L108-125 makes of m3a.py's step data (raw_screenshot L395, action_output L434,
    action_reason L456, action_output_json L462)."""
    mod = _android_world_module()
    names = ("android_world", "android_world.env", mod.__name__)
    sys.modules.update({n: mod if n == mod.__name__ else types.ModuleType(n) for n in names})
    try:
        n = len(actions)
        data = {"raw_screenshot": [screen(seed + i) for i in range(n)],
                "action_output": [f"Reason: {r}\nAction: {json.dumps(a)}" for r, a in zip(reasons, actions)],
                "action_reason": reasons, "action_output_json": [mod.JSONAction(**a) for a in actions],
                "summary": [f"s{i}" for i in range(n)], "step_number": list(range(n))}
        episode = {"goal": goal, "task_template": name.rsplit("_", 1)[0], "episode_data": data,
                   "is_successful": success, "run_time": 12.5, "finish_dtime": datetime.datetime(2025, 1, 2),
                   "episode_length": n, "aux_data": None, "screen_config": {"width": 12, "height": 24},
                   "exception_info": None, "seed": 123}
        return write_pickle(run_dir / f"{name}.pkl.gz", [episode])
    finally:
        for n in names:
            del sys.modules[n]


def androidworld_failed(run_dir: Path, name: str, goal: str) -> Path:
    """A task that raised: suite_utils.py L546-557 `_create_failed_result`."""
    return write_pickle(run_dir / f"{name}.pkl.gz", [{
        "goal": goal, "task_template": name.rsplit("_", 1)[0], "episode_data": np.nan, "is_successful": np.nan,
        "finish_dtime": datetime.datetime(2025, 1, 2), "run_time": 3.0, "episode_length": np.nan,
        "exception_info": "Traceback (most recent call last):\nRuntimeError: adb died", "aux_data": None}])


def write_pickle(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = pickle.dumps(obj)
    with gzip.GzipFile(path, "wb", compresslevel=5) as f:
        f.write(buf)
    return path
