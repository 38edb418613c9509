"""formats/agentrewardbench.py on trajectories/ laid out as AgentRewardBench's scripts write it (the
module docstring cites the files and lines)."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from adaptrubric_local.formats import detect_format, load_trajectories
from adaptrubric_local.formats.agentrewardbench import _package_annotations, describe, is_agentrewardbench

AGENT = "GenericAgent-Qwen_Qwen2.5-VL-72B-Instruct"
ANN_HEADER = ["annotator_name", "benchmark", "task_id", "model_name", "exp_name", "trajectory_success",
              "trajectory_side_effect", "trajectory_optimality", "trajectory_looping"]


def png(path: Path, color: str = "red") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 6), color).save(path)


def arb_step(num: int, action, reasoning: str, screenshot: str) -> dict:
    """Step.to_dict (agent_reward_bench/trajectories.py L544-559) with axtree_pruned added (L561-570)."""
    return {"num": num, "reasoning": reasoning, "action": action, "screenshot_path": screenshot, "url": "http://wa/",
            "open_pages_urls": ["http://wa/"], "focused_element": "a1", "last_action_error": "", "stats": {},
            "axtree": "RootWebArea", "axtree_obj": {"nodes": []}, "chat_messages": [], "bounding_boxes": {},
            "extra_element_properties": {}, "axtree_pruned": "RootWebArea"}


def write_arb(root: Path, task: str = "webarena.177", valid: bool = True, agent: str = AGENT) -> Path:
    """trajectories/ as convert_trajectories_to_json.py + clean_processed_trajectories.py leave it."""
    benchmark = task.split(".")[0]
    shots = f"trajectories/screenshots/{benchmark}/{agent}/{task}"
    for n in range(3):
        png(root / "screenshots" / benchmark / agent / task / f"screenshot_step_{n}.png")
    doc = {"benchmark": benchmark, "agent": agent, "model": "Qwen/Qwen2.5-VL-72B-Instruct", "valid": valid,
           "experiment": f"{agent}_on_{benchmark}", "goal": "What is the top product?\n", "seed": 0,
           "model_args": {}, "flags": {}, "summary_info": {"cum_reward": 0.0, "n_steps": 2},
           "package_version": "", "steps": [
               arb_step(0, "fill('a12', 'best sellers')", "search first", f"{shots}/screenshot_step_0.png"),
               arb_step(1, "send_msg_to_user('Sprite 12-pack')", "answer", f"{shots}/screenshot_step_1.png"),
               arb_step(2, None, None, f"{shots}/screenshot_step_2.png")]}
    out = root / "cleaned" / benchmark / agent / f"{agent}_on_{benchmark}" / f"{task}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(json.dumps(doc, separators=(",", ":")).encode())  # orjson.dumps writes compact JSON
    return out


def test_agentrewardbench_fields_and_labels_from_its_annotations_csv(tmp_path):
    root = tmp_path / "trajectories"
    write_arb(root)
    write_arb(root, task="webarena.24")
    write_arb(root, task="webarena.99", valid=False)
    with open(root / "annotations.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(ANN_HEADER)
        w.writerow(["A", "webarena", "webarena.177", AGENT, f"{AGENT}_on_webarena", "Successful", "No", "4", "No"])
        w.writerow(["B", "webarena", "webarena.177", AGENT, f"{AGENT}_on_webarena", "Unsuccessful", "No", "2", "No"])
        w.writerow(["A", "webarena", "webarena.24", AGENT, f"{AGENT}_on_webarena", "Unsure", "No", "2", "No"])
    assert detect_format(root) == "agentrewardbench"
    res = load_trajectories(root)
    assert not res.errors
    t, t24 = res.trajectories
    assert t.id == f"webarena/{AGENT}/webarena.177" and t.task_id == "webarena.177" and t.platform == "web"
    assert t.instruction == "What is the top product?" and t.answer == "Sprite 12-pack"
    assert t.label == 1  # the first row is the primary annotator's
    assert t24.label is None and any("Unsure" in w for w in res.warnings)
    assert any("valid is false" in w for w in res.warnings)
    assert [(s.action_type, s.text, s.thought) for s in t.steps] == [
        ("type", "best sellers", "search first"), ("answer", None, "answer"), ("observe", None, None)]
    assert t.steps[0].screenshot == str(
        (root / "screenshots" / "webarena" / AGENT / "webarena.177" / "screenshot_step_0.png").resolve())
    # a copy moved and renamed loads too, from cleaned/ or one benchmark below it
    moved = tmp_path / "elsewhere" / "arb"
    shutil.copytree(root, moved)
    assert len(load_trajectories(moved / "cleaned" / "webarena").trajectories) == 2


@pytest.mark.skipif(_package_annotations() is None, reason="agent-reward-bench is not installed")
def test_agentrewardbench_labels_from_the_installed_package(tmp_path):
    root = tmp_path / "trajectories"
    write_arb(root)  # annotations.csv of agent-reward-bench 0.1.2: webarena.177 by this agent is Unsuccessful
    (t,) = load_trajectories(root).trajectories
    assert t.label == 0


def test_browsergym_actions():
    assert describe("click('a51')")[1:] == ("tap", None, None)
    assert describe("report_infeasible('no such page')")[1:] == ("answer", None, "no such page")
    assert describe("scroll(0, 200)")[1] == "scroll"
    assert describe("not python(")[1] is None


def test_a_cleaned_folder_of_other_json_is_not_agentrewardbench(tmp_path):
    (tmp_path / "cleaned" / "x").mkdir(parents=True)
    (tmp_path / "cleaned" / "x" / "a.json").write_text('{"trace_id": "t", "trajectory": []}')
    assert not is_agentrewardbench(tmp_path)
    write_arb(tmp_path / "trajectories")
    assert is_agentrewardbench(tmp_path / "trajectories")
