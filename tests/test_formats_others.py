"""The OSReward and ClawGUI loaders (formats/others.py): every field of the parsed trajectory, and the
file/record/field/id of every error."""
import json
from pathlib import Path

import pytest

from adaptrubric_local import Trajectory, detect_format, load_trajectories
from adaptrubric_local.formats import others
from adaptrubric_local.formats.base import DataError
from adaptrubric_local.types import Step

from conftest import make_png


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


def _dump(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def _err(exc: DataError, root: Path) -> tuple:
    return (Path(exc.file).relative_to(root).as_posix(), exc.record, exc.field, exc.problem, exc.record_id)


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


def test_loader_functions_check_images_by_default(tmp_path):
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
