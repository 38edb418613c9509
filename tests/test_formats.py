"""Loaders for every supported format, format detection, and bad-input handling."""
import json

from adaptrubric_local import Trajectory, detect_format, load_trajectories
from adaptrubric_local.formats import canonical

from conftest import canonical_record, make_png, write_jsonl


def test_canonical_roundtrip(canonical_file, tmp_path):
    res = load_trajectories(canonical_file)
    assert not res.errors and len(res.trajectories) == 4
    t = res.trajectories[1]
    assert isinstance(t, Trajectory) and t.label == 1 and t.platform == "android" and t.task_id == "task0"
    assert all(s.screenshot.startswith(str(tmp_path)) for s in t.steps)
    out = tmp_path / "again.jsonl"
    canonical.write(res.trajectories, out)
    try:
        canonical.write(res.trajectories, tmp_path / "sub" / "x.jsonl")
    except ValueError as exc:
        assert "outside" in str(exc)
    else:
        raise AssertionError("images outside the JSONL folder must be refused")
    again = load_trajectories(out)
    assert [x.to_dict()["instruction"] for x in again.trajectories] == [x.instruction for x in res.trajectories]


def test_bad_records_do_not_lose_good_ones(tmp_path):
    good = canonical_record(tmp_path, "good", 2)
    escape = canonical_record(tmp_path, "escape", 2)
    escape["steps"][1]["screenshot"] = "../../etc/passwd"
    missing = canonical_record(tmp_path, "missing", 2)
    missing["steps"][0]["screenshot"] = "img/nope.png"
    empty = {"id": "empty", "instruction": "x", "steps": []}
    unknown = {**canonical_record(tmp_path, "unk", 1), "lable": 1}
    path = write_jsonl(tmp_path / "d.jsonl", [good, "{not json", escape, missing, empty, unknown,
                                             {"id": "noinst", "steps": good["steps"]}])
    res = load_trajectories(path)
    assert [t.id for t in res.trajectories] == ["good"]
    msgs = [str(e) for e in res.errors]
    assert len(msgs) == 6
    assert any("line 2" in m and "malformed JSON" in m for m in msgs)
    assert any("escape" in m and "steps[1].screenshot" in m and "escapes the dataset folder" in m for m in msgs)
    assert any("missing" in m and "image not found" in m for m in msgs)
    assert any("empty" in m and "no steps" in m for m in msgs)
    assert any("lable" in m for m in msgs)
    assert any("noinst" in m and "'instruction'" in m for m in msgs)
    assert all(str(path) in m for m in msgs)


def _androidgen(root, tid, n, two_on_one_line=False):
    rows = []
    for i in range(n):
        make_png(root / tid / "screenshots" / f"{i}-raw.png", i)
        make_png(root / tid / "screenshots" / f"{i}.png", i + 50)
        pa = {"operation": "do", "action": "Click", "kwargs": {"element_id": "3"}}
        if i == 1:
            pa = {"operation": "do", "action": "Input_text", "kwargs": {"text": "hello", "element_id": "2"}}
        if i == n - 1:
            pa = {"operation": "exit", "kwargs": {"message": "done: 42"}}
        rows.append(json.dumps({"instruction": "What is the answer?", "index": i, "trace_id": int(tid),
                                "image": f"{tid}/screenshots/{i}.png", "raw": f"{tid}/screenshots/{i}-raw.png",
                                "state": '<element id="3" class="Button" clickable> OK </element>',
                                "parsed_action": pa}))
    if two_on_one_line:
        rows = [rows[0] + " " + rows[1]] + rows[2:]
    (root / tid / "record.jsonl").write_text("\n".join(rows) + "\n")


def test_androidgen_folder_with_malformed_line(tmp_path):
    _androidgen(tmp_path, "111", 4)
    _androidgen(tmp_path, "222", 3, two_on_one_line=True)
    (tmp_path / "labels.jsonl").write_text('{"trace_id": "111", "label": 0}\n')
    assert detect_format(tmp_path) == "androidgen"
    res = load_trajectories(tmp_path)
    assert not res.errors
    by_id = {t.id: t for t in res.trajectories}
    assert len(by_id["222"].steps) == 3 and by_id["111"].label == 0
    assert any("222/record.jsonl" in w and "2 JSON objects" in w for w in res.warnings)
    t = by_id["111"]
    assert t.answer == "done: 42" and t.steps[1].text == "hello" and '"OK"' in t.steps[0].action
    assert t.steps[0].screenshot.endswith("0-raw.png")


def test_zerogui_result_folder(tmp_path):
    ex = tmp_path / "chrome" / "abc-123"
    make_png(ex / "step_0.png", 1)
    rows = []
    for i in range(1, 4):
        make_png(ex / f"step_{i}_20240101@000{i}.png", i + 1)
        act = "pyautogui.typewrite('hello world')" if i == 2 else "pyautogui.click(10, 20)"
        rows.append({"step_num": i, "action": act, "screenshot_file": f"step_{i}_20240101@000{i}.png",
                     "response": "thinking"})
    write_jsonl(ex / "traj.jsonl", rows)
    (ex / "result.txt").write_text("1.0\n")
    (ex / "task.json").write_text(json.dumps({"instruction": "Type hello world in the search bar."}))
    assert detect_format(tmp_path) == "zerogui"
    res = load_trajectories(tmp_path)
    assert not res.errors, res.errors
    t = res.trajectories[0]
    assert t.label == 1 and len(t.steps) == 4 and t.steps[2].text == "hello world"
    assert t.instruction.startswith("Type hello")


def test_osreward_trace(tmp_path):
    for i in range(3):
        make_png(tmp_path / "shots" / f"{i}.png", i)
    doc = {"trace_id": "tr-1", "instruction": "Open settings", "platform": "windows",
           "trajectory": [{"screenshot_path": f"shots/{i}.png", "action": "click(1,2)", "thought": "t"}
                          for i in range(3)], "human_label": "FAIL"}
    (tmp_path / "tr-1.json").write_text(json.dumps(doc))
    assert detect_format(tmp_path) == "osreward"
    res = load_trajectories(tmp_path)
    assert not res.errors and res.trajectories[0].label == 0 and res.trajectories[0].platform == "windows"


def test_clawgui_episode(tmp_path):
    ep = tmp_path / "ep1"
    for i in range(2):
        make_png(ep / "images" / f"{i}.png", i)
    doc = {"meta_data": {"task_goal": "Send hi to Bob", "success": True},
           "episode": [{"image_path": f"images/{i}.png", "model_response": "tap(3)"} for i in range(2)]}
    (ep / "episode.json").write_text(json.dumps(doc))
    assert detect_format(tmp_path) == "clawgui"
    res = load_trajectories(tmp_path)
    assert not res.errors and res.trajectories[0].label == 1 and res.trajectories[0].instruction == "Send hi to Bob"


def test_all_shared_androidgen_trajectories_load(shared_androidgen):
    res = load_trajectories(shared_androidgen)
    assert len(res.trajectories) == 10 and not res.errors
    assert any("1720533256/record.jsonl" in w for w in res.warnings)
    assert all(t.label in (0, 1) for t in res.trajectories)


def test_unknown_folder_says_what_it_looked_for(tmp_path):
    (tmp_path / "readme.txt").write_text("hi")
    try:
        detect_format(tmp_path)
    except ValueError as exc:
        assert "could not detect" in str(exc) and "record.jsonl" in str(exc)
    else:
        raise AssertionError("expected an error")
