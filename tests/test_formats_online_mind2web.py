"""formats/online_mind2web.py on task folders laid out as Online-Mind2Web's evaluator reads them (the
module docstring cites the files)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from PIL import Image

from adaptrubric_local.formats import detect_format, load_trajectories
from adaptrubric_local.formats.online_mind2web import classify, load_online_mind2web


def png(path: Path, color: str = "red") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 6), color).save(path)


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


def test_online_mind2web_v1_without_its_screenshot_folder_is_one_error(tmp_path):
    task = om2w_v1(tmp_path)
    other = om2w_v1(tmp_path / "x", agent_dir="Browser_Use")
    shutil.move(str(other), str(task.parent / "0123456789abcdef0123456789abcdef"))
    shutil.rmtree(task / "trajectory")
    res = load_online_mind2web(task.parent)
    assert len(res.trajectories) == 1
    (err,) = res.errors
    assert err.record_id == task.name and err.field == "trajectory"
