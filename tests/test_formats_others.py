"""The ZeroGUI/OSWorld, OSReward and ClawGUI loaders (formats/others.py): code actions, every field of
the parsed trajectory, and the file/record/field/id of every error."""
import json
from pathlib import Path

import pytest

from adaptrubric_local import Trajectory, detect_format, load_trajectories
from adaptrubric_local.formats import others
from adaptrubric_local.formats.base import DataError
from adaptrubric_local.types import Step

from conftest import make_png, write_jsonl


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


# ---------------------------------------------------------------- classify_code_action
@pytest.mark.parametrize("action,expected", [
    ("pyautogui.typewrite('hello')", ("type", "hello", None)),
    ('write(text="abc")', ("type", "abc", None)),
    ("input_text('x y')", ("type", "x y", None)),
    ("answer('42')", ("answer", None, "42")),
    ("finished(content='done it')", ("answer", None, "done it")),
    ("terminate(message=\"bye\")", ("answer", None, "bye")),
    ("pyautogui.hotkey('ctrl', 'c')", ("hotkey", None, None)),
    ("pyautogui.press('enter')", ("key", None, None)),
    ("pyautogui.scroll(-3)", ("scroll", None, None)),
    ("pyautogui.dragTo(3, 4)", ("drag", None, None)),
    ("pyautogui.CLICK(3, 4)", ("tap", None, None)),
    ("tap(3, 4)", ("tap", None, None)),
    ("swipe(up)", ("swipe", None, None)),
    ("WAIT", ("wait", None, None)),
    ("DONE", ("done", None, None)),
    ("look around", (None, None, None)),
])
def test_classify_code_action(action, expected):
    assert others.classify_code_action(action) == expected


def test_code_step_keeps_text_thought_and_answer():
    step, ans = others.code_step("/s.png", {"name": "answer('7')"}, "because")
    assert step == Step(screenshot="/s.png", action='{"name": "answer(\'7\')"}', action_type="answer",
                        text=None, thought="because")
    assert ans == "7"
    step, ans = others.code_step("/s.png", None, 5)
    assert step == Step(screenshot="/s.png", action="", action_type=None, text=None, thought=None)
    assert ans is None
    assert others.code_step("/s", "ä typewrite('ü')", None)[0].text == "ü"
    assert others.code_step("/s", {"a": "ü"}, None)[0].action == '{"a": "ü"}'


# ---------------------------------------------------------------- ZeroGUI
def _zerogui(folder: Path, rows, result="1.0", step0=True, instruction_in_rows=True):
    folder.mkdir(parents=True, exist_ok=True)
    if step0:
        make_png(folder / "step_0.png", 0)
    for r in rows:
        if isinstance(r, dict) and "step_num" in r:
            make_png(folder / r.get("screenshot_file", f"step_{r['step_num']}.png"), r["step_num"])
    if instruction_in_rows and rows and isinstance(rows[0], dict):
        rows[0]["instruction"] = "Open the file."
    (folder / "traj.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if result is not None:
        (folder / "result.txt").write_text(result)
    return folder


def test_zerogui_every_field(tmp_path):
    folder = _zerogui(tmp_path / "runs" / "task1", [
        {"step_num": 2, "action": "pyautogui.typewrite('hi')", "response": "typing"},
        {"step_num": 1, "action": "pyautogui.click(1, 2)", "screenshot_file": "shot_a.png"},
        {"step_num": 3, "action": "answer('ok')"},
    ], result=" 0.75 ")
    res = others.load_zerogui(tmp_path / "runs")
    assert res.errors == [] and len(res.trajectories) == 1
    t = res.trajectories[0]
    assert t == Trajectory(id="task1", instruction="Open the file.", steps=[
        Step(str((folder / "step_0.png").resolve()), "(initial screen)", "observe"),
        Step(str((folder / "shot_a.png").resolve()), "pyautogui.click(1, 2)", "tap"),
        Step(str((folder / "step_2.png").resolve()), "pyautogui.typewrite('hi')", "type", "hi", "typing"),
        Step(str((folder / "step_3.png").resolve()), "answer('ok')", "answer"),
    ], answer="ok", platform="ubuntu", task_id="task1", label=1)
    assert t.source == str(folder / "traj.jsonl")


def test_zerogui_folder_itself_and_its_file(tmp_path):
    folder = _zerogui(tmp_path / "task9", [{"step_num": 1, "action": "click"}], result="0.5", step0=False)
    for given in (folder, folder / "traj.jsonl"):
        res = others.load_zerogui(given)
        assert [(t.id, t.label, len(t.steps)) for t in res.trajectories] == [("task9", 0, 1)]
    many = others.load_zerogui(tmp_path)
    assert [t.id for t in many.trajectories] == ["task9"]


def test_zerogui_nested_ids_and_step_number_default(tmp_path):
    a = _zerogui(tmp_path / "d" / "a", [{"step_num": 1, "action": "click"}])
    b = tmp_path / "d" / "b"
    b.mkdir(parents=True)
    make_png(b / "step_1.png", 1)
    make_png(b / "step_2.png", 2)
    (b / "traj.jsonl").write_text(json.dumps({"action": "click", "instruction": "x"}) + "\n"
                                  + json.dumps({"action": "press"}) + "\n")
    res = others.load_zerogui(tmp_path / "d")
    assert res.errors == []
    assert [t.id for t in res.trajectories] == ["a", "b"]
    tb = res.trajectories[1]
    assert [Path(s.screenshot).name for s in tb.steps] == ["step_1.png", "step_2.png"]
    assert [s.action_type for s in tb.steps] == ["tap", "key"] and tb.label is None
    assert a.name == "a"


def _dump(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def test_zerogui_instruction_sources(tmp_path):
    one = _zerogui(tmp_path / "one", [{"step_num": 1, "action": "click"}], instruction_in_rows=False)
    (one / "instruction.txt").write_text("  From the text file.\n")
    two = _zerogui(tmp_path / "two", [{"step_num": 1, "action": "click"}], instruction_in_rows=False)
    (two / "a_broken.json").write_text("{not json")
    _dump(two / "b_other.json", {"instruction": 5})
    _dump(two / "c_list.json", ["instruction"])
    _dump(two / "d_task.json", {"instruction": "From the task JSON."})
    _dump(two / "e_task.json", {"instruction": "Not this one."})
    _zerogui(tmp_path / "three", [{"step_num": 1, "action": "click", "instruction": 3},
                                          {"step_num": 2, "action": "click", "instruction": "Second row."}],
                     instruction_in_rows=False)
    res = others.load_zerogui(tmp_path)
    assert [(t.id, t.instruction) for t in res.trajectories] == [
        ("one", "From the text file."), ("three", "Second row."), ("two", "From the task JSON.")]


def _err(exc: DataError, root: Path) -> tuple:
    return (Path(exc.file).relative_to(root).as_posix(), exc.record, exc.field, exc.problem, exc.record_id)


def test_zerogui_errors(tmp_path):
    _zerogui(tmp_path / "a_noinstr", [{"step_num": 1, "action": "click"}], instruction_in_rows=False)
    _zerogui(tmp_path / "b_notobj", [{"step_num": 1, "action": "click"}, [1, 2]])
    _zerogui(tmp_path / "c_result", [{"step_num": 1, "action": "click"}], result="success!" * 10)
    _zerogui(tmp_path / "d_missing", [{"step_num": 4, "action": "click", "screenshot_file": "nope.png"}],
             step0=False)
    (tmp_path / "d_missing" / "nope.png").unlink()
    bad = tmp_path / "e_badline"
    bad.mkdir()
    (bad / "traj.jsonl").write_text('{"step_num": 1\n')
    _zerogui(tmp_path / "f_empty", [], step0=False)
    (tmp_path / "f_empty" / "instruction.txt").write_text("x")
    res = others.load_zerogui(tmp_path)
    assert res.trajectories == []
    errs = [_err(e, tmp_path) for e in res.errors]
    missing = (tmp_path / "d_missing" / "nope.png").resolve()
    assert errs == [
        ("a_noinstr/traj.jsonl", "folder a_noinstr", "instruction",
         "no instruction in traj.jsonl, instruction.txt or a task JSON", "a_noinstr"),
        ("b_notobj/traj.jsonl", "folder b_notobj", "step 2", "step is not a JSON object", "b_notobj"),
        ("c_result/result.txt", "folder c_result", None,
         f"expected a number, got {('success!' * 10)[:40]!r}", "c_result"),
        ("d_missing/traj.jsonl", "step_num 4", "screenshot_file", f"image not found: {missing}", "d_missing"),
        ("e_badline/traj.jsonl", "line 1", None,
         "malformed JSON (Expecting ',' delimiter at column 15)", "e_badline"),
        ("f_empty/traj.jsonl", "folder f_empty", "steps", "trajectory has no steps", "f_empty"),
    ]


def test_zerogui_without_image_check_and_with_extra_roots(tmp_path):
    folder = _zerogui(tmp_path / "t", [{"step_num": 1, "action": "click", "screenshot_file": "gone.png"}],
                      step0=False)
    (folder / "gone.png").unlink()
    assert others.load_zerogui(folder).errors
    res = others.load_zerogui(folder, check_images=False)
    assert res.errors == [] and res.trajectories[0].steps[0].screenshot == str((folder / "gone.png").resolve())
    shots = tmp_path.parent / (tmp_path.name + "_shots")
    make_png(shots / "x.png", 3)
    rows = [{"step_num": 1, "action": "click", "screenshot_file": str(shots / "x.png"), "instruction": "i"}]
    (folder / "traj.jsonl").write_text(json.dumps(rows[0]) + "\n")
    assert others.load_zerogui(folder).errors
    ok = others.load_zerogui(folder, image_roots=[shots])
    assert ok.errors == [] and ok.trajectories[0].steps[0].screenshot == str((shots / "x.png").resolve())


# ---------------------------------------------------------------- OSReward
def _trace(root: Path, tid="tr1", n=2, **extra) -> dict:
    steps = []
    for i in range(n):
        make_png(root / "img" / f"{tid}_{i}.png", i)
        steps.append({"screenshot_path": f"img/{tid}_{i}.png", "action": f"click({i})", "thought": f"t{i}"})
    return {"trace_id": tid, "instruction": "Do it.", "platform": "windows", "task_id": "T1",
            "trajectory": steps, "human_label": "SUCCESS", **extra}


def test_osreward_every_field(tmp_path):
    obj = _trace(tmp_path)
    obj["trajectory"][1]["action"] = "answer('forty')"
    path = _dump(tmp_path / "trace.json", obj)
    res = others.load_osreward(path)
    assert res.errors == []
    img = (tmp_path / "img").resolve()
    assert res.trajectories == [Trajectory(
        id="tr1", instruction="Do it.", steps=[Step(str(img / "tr1_0.png"), "click(0)", "tap", None, "t0"),
                                               Step(str(img / "tr1_1.png"), "answer('forty')", "answer", None, "t1")],
        answer="forty", platform="windows", task_id="T1", label=1)]
    assert res.trajectories[0].source == str(path)
    obj2 = _trace(tmp_path, "tr2", answer="given", human_label="FAIL", trace_id=7)
    path2 = _dump(tmp_path / "list.json", [obj2])
    t2 = others.load_osreward(path2).trajectories[0]
    assert (t2.id, t2.answer, t2.label) == ("7", "given", 0)
    obj3 = _trace(tmp_path, "tr3", answer=3)
    obj3["trajectory"][0]["action"] = "answer('a0')"
    t3 = others.load_osreward(_dump(tmp_path / "three.json", obj3)).trajectories[0]
    assert t3.answer == "a0"


def test_osreward_folder_skips_other_json_and_keeps_going(tmp_path):
    (tmp_path / "a_bad.json").write_text("{oops")
    _dump(tmp_path / "b_other.json", {"name": "settings"})
    _dump(tmp_path / "c.json", [_trace(tmp_path, "c1"), _trace(tmp_path, "c2")])
    _dump(tmp_path / "sub" / "d.json", _trace(tmp_path, "d1"))
    res = others.load_osreward(tmp_path)
    assert [t.id for t in res.trajectories] == ["c1", "c2", "d1"]
    assert [_err(e, tmp_path) for e in res.errors] == [
        ("a_bad.json", None, None, "malformed JSON (Expecting property name enclosed in double quotes at line 1, "
                                   "column 2)",
         None)]
    # a single file without trace_id is an error, not skipped
    one = others.load_osreward(_dump(tmp_path / "solo" / "x.json", {"name": "settings"}))
    assert [_err(e, tmp_path) for e in one.errors] == [
        ("solo/x.json", "trace None", "trajectory", "required field missing", None)]


def test_osreward_errors(tmp_path):
    cases = {
        "a": {**_trace(tmp_path, "a"), "trajectory": "x"},
        "b": {**_trace(tmp_path, "b"), "trajectory": [5]},
        "c": {**_trace(tmp_path, "c"), "instruction": None},
        "d": {**_trace(tmp_path, "d"), "human_label": "maybe"},
        "e": {**_trace(tmp_path, "e"), "trajectory": []},
        "f": {**_trace(tmp_path, "f"), "trace_id": 1.5},
        "g": {**_trace(tmp_path, "g"), "instruction": "  "},
    }
    for name, obj in cases.items():
        _dump(tmp_path / f"{name}.json", obj)
    _dump(tmp_path / "z.json", [3])
    res = others.load_osreward(tmp_path)
    assert res.trajectories == []
    assert [_err(e, tmp_path) for e in res.errors] == [
        ("a.json", "trace a", "trajectory", "expected list, got str", "a"),
        ("b.json", "trace b", "trajectory[0]", "step must be an object", "b"),
        ("c.json", "trace c", "instruction", "required field missing", "c"),
        ("d.json", "trace d", "human_label", "label must be 0/1 (or SUCCESS/FAIL), got 'maybe'", "d"),
        ("e.json", "trace e", "steps", "trajectory has no steps", "e"),
        ("f.json", "trace 1.5", "trace_id", "expected str or int, got float", None),
        ("g.json", "trace g", "instruction", "instruction is empty", "g"),
        ("z.json", "trace", None, "expected a JSON object, got int", None),
    ]


def test_osreward_image_options(tmp_path):
    obj = _trace(tmp_path, "m")
    (tmp_path / "img" / "m_1.png").unlink()
    path = _dump(tmp_path / "m.json", obj)
    assert [e.field for e in others.load_osreward(path).errors] == ["trajectory[1].screenshot_path"]
    assert others.load_osreward(path, check_images=False).errors == []
    shots = tmp_path.parent / (tmp_path.name + "_shots")
    make_png(shots / "s.png", 1)
    obj["trajectory"][1]["screenshot_path"] = str(shots / "s.png")
    path = _dump(tmp_path / "m.json", obj)
    assert others.load_osreward(path).errors
    ok = others.load_osreward(path, image_roots=[shots])
    assert ok.errors == [] and ok.trajectories[0].steps[1].screenshot == str((shots / "s.png").resolve())


# ---------------------------------------------------------------- ClawGUI
def _episode(folder: Path, n=2, meta=None, **extra) -> Path:
    steps = []
    for i in range(n):
        make_png(folder / "images" / f"{i}.png", i)
        steps.append({"image_path": f"images/{i}.png", "model_response": f"tap({i})"})
    doc = {"meta_data": {"task_goal": "Send it.", "success": True, **(meta or {})}, "episode": steps, **extra}
    return _dump(folder / "episode.json", doc)


def test_clawgui_every_field(tmp_path):
    path = _episode(tmp_path / "ep1", meta={"episode_id": "E-1", "platform": "ios", "task_id": "k1"})
    doc = json.loads(path.read_text())
    doc["episode"][1]["action"] = "answer('sent')"
    _dump(path, doc)
    res = others.load_clawgui(tmp_path)
    assert res.errors == []
    img = (tmp_path / "ep1" / "images").resolve()
    assert res.trajectories == [Trajectory(
        id="E-1", instruction="Send it.", steps=[Step(str(img / "0.png"), "tap(0)", "tap"),
                                                 Step(str(img / "1.png"), "answer('sent')", "answer")],
        answer="sent", platform="ios", task_id="k1", label=1)]
    assert res.trajectories[0].source == str(path)
    t = others.load_clawgui(_episode(tmp_path / "ep2", meta={"task_name": "named", "success": 0})).trajectories[0]
    assert (t.id, t.platform, t.task_id, t.label) == ("ep2", "android", "named", 0)


def test_clawgui_id():
    f = Path("/x/folder/episode.json")
    assert others.clawgui_id({"meta_data": {"episode_id": 12}}, f) == "12"
    assert others.clawgui_id({"meta_data": {"episode_id": " "}}, f) == "folder"
    assert others.clawgui_id({"meta_data": "m"}, f) == "folder"
    assert others.clawgui_id(["x"], f) == "folder"


def test_clawgui_errors(tmp_path):
    _episode(tmp_path / "a", extra_key=1)
    doc = json.loads((tmp_path / "a" / "episode.json").read_text())
    doc["meta_data"] = "m"
    _dump(tmp_path / "a" / "episode.json", doc)
    _episode(tmp_path / "b", episode="x")
    _episode(tmp_path / "c", meta={"episode_id": "C"})
    doc = json.loads((tmp_path / "c" / "episode.json").read_text())
    doc["episode"][1] = 4
    _dump(tmp_path / "c" / "episode.json", doc)
    _episode(tmp_path / "d", meta={"task_goal": None})
    _episode(tmp_path / "e", meta={"success": "perhaps"})
    _episode(tmp_path / "f", n=0)
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "episode.json").write_text("[")
    _episode(tmp_path / "h")
    (tmp_path / "h" / "images" / "1.png").unlink()
    res = others.load_clawgui(tmp_path)
    assert res.trajectories == []
    missing = (tmp_path / "h" / "images" / "1.png").resolve()
    assert [_err(e, tmp_path) for e in res.errors] == [
        ("a/episode.json", "episode a", "meta_data", "expected dict, got str", "a"),
        ("b/episode.json", "episode b", "episode", "expected list, got str", "b"),
        ("c/episode.json", "episode c", "episode[1]", "step must be an object", "C"),
        ("d/episode.json", "episode d", "task_goal", "required field missing", "d"),
        ("e/episode.json", "episode e", "meta_data.success",
         "label must be 0/1 (or SUCCESS/FAIL), got 'perhaps'", "e"),
        ("f/episode.json", "episode f", "steps", "trajectory has no steps", "f"),
        ("g/episode.json", None, None, "malformed JSON (Expecting value at line 1, column 2)", "g"),
        ("h/episode.json", "episode h", "episode[1].image_path", f"image not found: {missing}", "h"),
    ]


def test_clawgui_image_options(tmp_path):
    path = _episode(tmp_path / "ep")
    (tmp_path / "ep" / "images" / "0.png").unlink()
    assert others.load_clawgui(path).errors
    assert others.load_clawgui(path, check_images=False).errors == []
    shots = tmp_path / "shots"
    make_png(shots / "s.png", 1)
    doc = json.loads(path.read_text())
    doc["episode"][0]["image_path"] = str(shots / "s.png")
    _dump(path, doc)
    assert others.load_clawgui(path).errors
    ok = others.load_clawgui(path, image_roots=[shots])
    assert ok.errors == [] and ok.trajectories[0].steps[0].screenshot == str((shots / "s.png").resolve())
    # with a folder given, any file under the data folder is allowed
    doc["episode"][0]["image_path"] = "../ep_shared.png"
    make_png(tmp_path / "ep_shared.png", 2)
    _dump(path, doc)
    assert others.load_clawgui(tmp_path).errors == []
    assert others.load_clawgui(path).errors


def test_zerogui_step_numbers_order_names_and_answers(tmp_path):
    folder = tmp_path / "z"
    folder.mkdir()
    for n in (0, 1, 5):
        make_png(folder / f"step_{n}.png", n)
    make_png(folder / "first.png", 9)
    rows = [{"step_num": 5, "action": "answer('kept')", "instruction": "i"},
            {"step_num": 1, "action": "click"},
            {"action": "press", "screenshot_file": "first.png"},
            {"step_num": 0, "action": "scroll"}]
    (folder / "traj.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    t = others.load_zerogui(folder).trajectories[0]
    assert [(Path(s.screenshot).name, s.action_type) for s in t.steps] == [
        ("step_0.png", "observe"), ("first.png", "key"), ("step_0.png", "scroll"), ("step_1.png", "tap"),
        ("step_5.png", "answer")]
    rows[0]["action"] = "click"
    rows[1]["action"] = "answer('early')"
    (folder / "traj.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert others.load_zerogui(folder).trajectories[0].answer == "early"


def test_zerogui_error_names_the_default_step_number(tmp_path):
    folder = tmp_path / "z"
    folder.mkdir()
    (folder / "traj.jsonl").write_text(json.dumps({"action": "click", "instruction": "i"}) + "\n")
    (err,) = others.load_zerogui(folder).errors
    assert (err.record, err.field) == ("step_num 1", "screenshot_file")
    assert err.problem == f"image not found: {(folder / 'step_1.png').resolve()}"


def test_zerogui_given_paths(tmp_path):
    top = _zerogui(tmp_path / "top", [{"step_num": 1, "action": "click"}])
    _zerogui(top / "nested", [{"step_num": 1, "action": "click"}])
    assert [t.id for t in others.load_zerogui(top).trajectories] == ["top"]
    assert others.load_zerogui(top / "result.txt").trajectories == []
    # a single folder's images may lie beside it (its parent is the data folder)
    make_png(tmp_path / "beside.png", 4)
    (top / "traj.jsonl").write_text(json.dumps({"step_num": 1, "action": "click", "instruction": "i",
                                                "screenshot_file": "../beside.png"}) + "\n")
    res = others.load_zerogui(top)
    assert res.errors == [] and res.trajectories[0].steps[1].screenshot == str((tmp_path / "beside.png").resolve())


def test_loader_functions_check_images_by_default(tmp_path):
    folder = _zerogui(tmp_path / "f", [{"step_num": 1, "action": "click"}], step0=False)
    (folder / "step_1.png").unlink()
    assert others.load_zerogui_folder(folder, tmp_path).errors
    assert [t.id for t in others.load_zerogui_folder(folder, folder, check_images=False).trajectories] == ["f"]
    obj = _trace(tmp_path, "p")
    (tmp_path / "img" / "p_0.png").unlink()
    with pytest.raises(DataError) as ei:
        others.parse_osreward(obj, tmp_path / "p.json", tmp_path)
    assert (ei.value.record, ei.value.field) == ("trace p", "trajectory[0].screenshot_path")
    path = _episode(tmp_path / "ep")
    (tmp_path / "ep" / "images" / "0.png").unlink()
    with pytest.raises(DataError):
        others.parse_clawgui(json.loads(path.read_text()), path, path.parent)


def test_osreward_list_with_other_objects_first(tmp_path):
    _dump(tmp_path / "all.json", [{"name": "not a trace"}, _trace(tmp_path, "later")])
    assert [t.id for t in others.load_osreward(tmp_path).trajectories] == ["later"]


def test_clawgui_answer_kept_across_later_steps(tmp_path):
    path = _episode(tmp_path / "ep", n=3)
    doc = json.loads(path.read_text())
    doc["episode"][0]["action"] = "answer('early')"
    _dump(path, doc)
    assert others.load_clawgui(path).trajectories[0].answer == "early"
