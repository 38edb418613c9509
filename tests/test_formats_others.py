"""The ZeroGUI/OSWorld loader (formats/others.py): code actions, every field of the parsed trajectory, and
the file/record/field/id of every error."""
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
