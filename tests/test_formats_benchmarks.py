"""AgentRewardBench and Online-Mind2Web loaders, on folders laid out as the projects' code writes them
(formats/agentrewardbench.py and formats/online_mind2web.py cite the files and lines)."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from adaptrubric_local.formats import detect_format, load_trajectories
from adaptrubric_local.formats.agentrewardbench import _package_annotations, describe
from adaptrubric_local.formats.online_mind2web import classify, load_online_mind2web

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


def om2w_v1(folder: Path, agent_dir: str = "Browser_Use") -> Path:
    """<trajectories_dir>/<task_id>/result.json + trajectory/ as src/run.py reads v1 (L49-71)."""
    task = folder / agent_dir / "fb7b4f784cfde003e2548fdf4e8d6b4f"
    for n in (0, 1, 2, 10):
        png(task / "trajectory" / f"{n}_full_screenshot.png")
    (task / "result.json").write_text(json.dumps({
        "task_id": "fb7b4f784cfde003e2548fdf4e8d6b4f",
        "task": "Open the page with an overview of the submission of releases on Discogs.",
        "final_result_response": "The overview page is open.",
        "action_history": ["<a> Help -> CLICK", "<input> Search -> TYPE: submission guidelines",
                           "<a> Submission Guidelines -> CLICK"],
        "thoughts": ["open help", "search", "open the page"]}))
    return task


def om2w_v2(folder: Path) -> Path:
    task = folder / "Operator" / "1b867afecf072cb877ebfa4069263746"
    for n in range(3):
        png(task / "trajectory" / f"{n:04d}.png")
    steps = [{"step": 0, "screenshot": "0000.png", "url": "https://x/",
              "action": "page -> NAVIGATE -> open x | SUCCESS", "action_status": "SUCCESS", "thought": None},
             {"step": 1, "screenshot": "0001.png", "url": "https://x/", "action": 'type_at(x=3, y=4, text="cheap")',
              "thought": "type"},
             {"step": 2, "screenshot": "0002.png", "url": "https://x/", "action": "TASK_COMPLETE -> ANSWER: 12 USD",
              "thought": None}]
    (task / "result.json").write_text(json.dumps({
        "schema_version": "online-mind2web-v2", "task": "Find the cheapest item.",
        "task_id": "1b867afecf072cb877ebfa4069263746", "agent_final_answer": "12 USD", "reference_length": 5,
        "action_history": steps}, indent=2))
    return task


def human_labels(folder: Path) -> None:
    (folder / "human_label.json").write_text(json.dumps([
        {"task_id": "fb7b4f784cfde003e2548fdf4e8d6b4f", "confirmed_task": "Open ...", "Operator_human_label": "1",
         "Browser_Use_human_label": "1", "SeeAct_human_label": "0"},
        {"task_id": "1b867afecf072cb877ebfa4069263746", "confirmed_task": "Find ...", "Operator_human_label": "2",
         "Browser_Use_human_label": "0", "SeeAct_human_label": "0"}]))


def test_online_mind2web_v1_fields_and_the_agent_label_column(tmp_path):
    task = om2w_v1(tmp_path)
    human_labels(tmp_path)
    assert detect_format(task.parent) == "online-mind2web"
    (t,) = load_trajectories(task.parent).trajectories
    assert t.id == t.task_id == "fb7b4f784cfde003e2548fdf4e8d6b4f" and t.platform == "web"
    assert t.answer == "The overview page is open." and t.label == 1  # Browser_Use column, by the folder's name
    # screenshots sorted by their first number (10 after 2), the last one the final screen
    assert [Path(s.screenshot).name for s in t.steps] == ["0_full_screenshot.png", "1_full_screenshot.png",
                                                          "2_full_screenshot.png", "10_full_screenshot.png"]
    assert [(s.action_type, s.text, s.thought) for s in t.steps] == [
        ("tap", None, "open help"), ("type", "submission guidelines", "search"), ("tap", None, "open the page"),
        ("observe", None, None)]
    (t,) = load_online_mind2web(task.parent, agent="SeeAct").trajectories
    assert t.label == 0


def test_online_mind2web_v2_and_label_2_is_no_label(tmp_path):
    task = om2w_v2(tmp_path)
    human_labels(tmp_path)
    res = load_trajectories(task)
    (t,) = res.trajectories
    assert t.instruction == "Find the cheapest item." and t.answer == "12 USD"
    assert [s.action_type for s in t.steps] == ["navigate", "type", "answer"] and t.steps[1].text == "cheap"
    assert t.steps[1].thought == "type" and Path(t.steps[2].screenshot).name == "0002.png"
    assert t.label is None and any("human label 2" in w for w in res.warnings)


def test_online_mind2web_unknown_agent_warns_and_missing_screenshot_is_an_error(tmp_path):
    task = om2w_v2(tmp_path)
    human_labels(tmp_path)
    res = load_online_mind2web(task.parent, agent="Nobody")
    assert res.trajectories[0].label is None and any("Operator_human_label" in w for w in res.warnings)
    (task / "trajectory" / "0001.png").unlink()
    res = load_online_mind2web(task.parent)
    (err,) = res.errors
    assert err.record_id == task.name and "image not found" in str(err)


def test_online_mind2web_actions():
    assert classify("[button] Search -> CLICK") == ("tap", None)
    assert classify("SCROLL page -> scroll down | SUCCESS") == ("scroll", None)


def test_a_cleaned_folder_of_other_json_is_not_agentrewardbench(tmp_path):
    from adaptrubric_local.formats.agentrewardbench import is_agentrewardbench

    (tmp_path / "cleaned" / "x").mkdir(parents=True)
    (tmp_path / "cleaned" / "x" / "a.json").write_text('{"trace_id": "t", "trajectory": []}')
    assert not is_agentrewardbench(tmp_path)
    write_arb(tmp_path / "trajectories")
    assert is_agentrewardbench(tmp_path / "trajectories")


def test_online_mind2web_v1_without_its_screenshot_folder_is_one_error(tmp_path):
    task = om2w_v1(tmp_path)
    other = om2w_v1(tmp_path / "x", agent_dir="Browser_Use")
    shutil.move(str(other), str(task.parent / "0123456789abcdef0123456789abcdef"))
    shutil.rmtree(task / "trajectory")
    res = load_online_mind2web(task.parent)
    assert len(res.trajectories) == 1
    (err,) = res.errors
    assert err.record_id == task.name and err.field == "trajectory"
