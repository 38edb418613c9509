"""The AndroidGen loader (formats/androidgen.py): action descriptions, element labels, every field of a
trajectory, step order, answers, image roots and the file/record/field of each error."""
import json
from pathlib import Path

import pytest

from adaptrubric_local import Trajectory, detect_format, load_trajectories
from adaptrubric_local.formats import FORMATS, androidgen
from adaptrubric_local.types import Step

from conftest import make_png


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
        rows = [rows[0] + " " + rows[1], *rows[2:]]
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


def test_all_shared_androidgen_trajectories_load(shared_androidgen):
    res = load_trajectories(shared_androidgen)
    assert len(res.trajectories) == 10 and not res.errors
    assert any("1720533256/record.jsonl" in w for w in res.warnings)
    assert all(t.label in (0, 1) for t in res.trajectories)


STATE = ('<element id="3" class="btn">  Send \n now </element><element id="4">' + "x" * 70 + '</element>'
         '<element id="5"> </element>')


@pytest.mark.parametrize("pa,expected", [
    ("raw text", ('"raw text"', None, None, None)),
    (["é"], ('["é"]', None, None, None)),
    ({"operation": "exit", "kwargs": {"message": "Done ✓"}}, ('finish(answer="Done ✓")', "answer", None, "Done ✓")),
    ({"operation": "exit"}, ("finish(answer=null)", "answer", None, None)),
    ({"operation": "open_app", "kwargs": {"app_name": "Markor"}}, ("open_app('Markor')", "open_app", None, None)),
    ({"operation": "quote", "kwargs": {"content": "é"}}, ('quote("é")', "read", None, None)),
    ({"operation": "do", "action": "Input Text", "kwargs": {"text": "hé", "element_id": 7}},
     ('type("hé") into element 7', "type", "hé", None)),
    ({"operation": "do", "action": "Click", "kwargs": {"element_id": 3}}, ('click(element 3 "Send now")', "tap", None,
                                                                           None)),
    ({"operation": "do", "action": "Long Press", "kwargs": {"element_id": 4}},
     (f'long_press(element 4 "{"x" * 60}")', "long_press", None, None)),
    ({"operation": "do", "action": "tap", "kwargs": {"element_id": 5}}, ("tap(element 5)", "tap", None, None)),
    ({"operation": "do", "action": "Click", "kwargs": {"element_id": 9}}, ("click(element 9)", "tap", None, None)),
    ({"operation": "do", "action": "Click"}, ("click(element None)", "tap", None, None)),
    ({"operation": "Swipe Up", "kwargs": {"dist": 3, "dir": "up"}}, ("swipe_up(dist=3, dir='up')", "swipe_up", None,
                                                                     None)),
    ({}, ("unknown()", "unknown", None, None)),
])
def test_describe_action(pa, expected):
    assert androidgen.describe_action(pa, STATE) == expected


def test_element_label_needs_a_state_and_an_id():
    assert androidgen.describe_action({"action": "click", "kwargs": {"element_id": 3}}, None) == \
        ("click(element 3)", "tap", None, None)
    assert androidgen._element_label(STATE, None) is None
    assert androidgen._element_label(STATE, 3) == "Send now"
    assert androidgen._element_label(STATE, "4") == "x" * 60


def _row(root: Path, tid: str, i: int, raw=True, **extra) -> dict:
    make_png(root / tid / f"som_{i}.png", i)
    row = {"instruction": "Open Markor.", "index": i, "image": f"{tid}/som_{i}.png",
           "parsed_action": {"operation": "do", "action": "Click", "kwargs": {"element_id": 1}}, **extra}
    if raw:
        make_png(root / tid / f"raw_{i}.png", i + 50)
        row["raw"] = f"{tid}/raw_{i}.png"
    return row


def _write_rows(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_trace_every_field_order_fallback_and_labels(tmp_path):
    rows = [_row(tmp_path, "tA", 2, response="r2", parsed_action={"operation": "exit", "kwargs": {"message": "m"}}),
            _row(tmp_path, "tA", 0, raw=False, response=5),
            _row(tmp_path, "tA", 1, index="one")]
    rows[2]["raw"] = "tA/missing_raw.png"
    f = _write_rows(tmp_path / "tA" / "record.jsonl", rows)
    _write_rows(tmp_path / "labels.jsonl", [{"trace_id": "tA", "label": "SUCCESS"}, {"label": 1}, "[1]", "{bad",
                                       {"trace_id": "tB", "label": "weird"}, {"trace_id": "tB", "label": 0}])
    res = androidgen.load(tmp_path)
    assert res.errors == []
    d = tmp_path.resolve() / "tA"
    click = 'click(element 1)'
    assert res.trajectories == [Trajectory(
        id="tA", instruction="Open Markor.", steps=[
            Step(str(d / "som_0.png"), click, "tap", None, None),
            Step(str(d / "som_1.png"), click, "tap", None, None),
            Step(str(d / "raw_2.png"), 'finish(answer="m")', "answer", None, "r2")],
        answer="m", platform="android", label=1)]
    assert res.trajectories[0].source == str(f)
    assert res.warnings == [f"{f}: 1 step(s) have no plain 'raw' screenshot; used the annotated 'image' instead"]
    assert androidgen._labels(tmp_path) == {"tA": 1, "tB": 0}


def test_trace_id_from_rows_and_single_folder(tmp_path):
    rows = [_row(tmp_path, "folder", 0, trace_id=""), _row(tmp_path, "folder", 1, trace_id=12)]
    _write_rows(tmp_path / "folder" / "record.jsonl", rows)
    for given in (tmp_path, tmp_path / "folder", tmp_path / "folder" / "record.jsonl"):
        res = androidgen.load(given, check_images=True)
        assert [t.id for t in res.trajectories] == ["12"] and res.warnings == []
    assert detect_format(tmp_path / "folder" / "record.jsonl") == "androidgen"


def test_trace_errors(tmp_path):
    _write_rows(tmp_path / "a" / "record.jsonl", [_row(tmp_path, "a", 0), "[1]", _row(tmp_path, "a", 2)])
    _write_rows(tmp_path / "b" / "record.jsonl", [_row(tmp_path, "b", 0, trace_id="B7"), "{bad"])
    _write_rows(tmp_path / "c" / "record.jsonl", [{k: v for k, v in _row(tmp_path, "c",
                                                                         0).items() if k != "instruction"}])
    _write_rows(tmp_path / "d" / "record.jsonl", [])
    r = _row(tmp_path, "e", 0, raw=False)
    r["image"] = "e/nothing.png"
    _write_rows(tmp_path / "e" / "record.jsonl", [r])
    _write_rows(tmp_path / "f" / "record.jsonl", [_row(tmp_path, "f", 0, instruction=" ")])
    res = androidgen.load(tmp_path)
    assert res.trajectories == []
    got = [(Path(e.file).relative_to(tmp_path).as_posix(), e.record, e.field, e.problem, e.record_id)
           for e in res.errors]
    assert got == [
        ("a/record.jsonl", "line 2", None, "step is not a JSON object", "a"),
        ("b/record.jsonl", "line 2", None, "malformed JSON (Expecting property name enclosed in double quotes "
                                           "at column 2)", "B7"),
        ("c/record.jsonl", "line 1", "instruction", "required field missing", "c"),
        ("d/record.jsonl", None, "steps", "no steps", "d"),
        ("e/record.jsonl", "line 1", "image", f"image not found: {(tmp_path / 'e' / 'nothing.png').resolve()}", "e"),
        ("f/record.jsonl", "trace f", "instruction", "instruction is empty", "f"),
    ]
    assert androidgen.load(tmp_path / "e", check_images=False).errors == []


def test_trace_images_from_extra_roots(tmp_path):
    data, shots = tmp_path / "data", tmp_path / "shots"
    make_png(shots / "x.png", 1)
    _write_rows(data / "t" / "record.jsonl", [{"instruction": "i", "image": str(shots / "x.png"), "index": 0}])
    assert androidgen.load(data).errors
    ok = androidgen.load(data, image_roots=[shots])
    assert ok.errors == [] and ok.trajectories[0].steps[0].screenshot == str((shots / "x.png").resolve())


def test_sort_order_answer_and_unicode_labels(tmp_path):
    rows = [_row(tmp_path, "u", 5, index="late", parsed_action={"operation": "exit", "kwargs": {"message": "fin"}}),
            _row(tmp_path, "u", 0, index=0, parsed_action={"action": "Click", "kwargs": {"element_id": 8}},
                 state='<element id="8">Café ✓</element>')]
    rows.append(_row(tmp_path, "u", 1, index=1))
    f = _write_rows(tmp_path / "u" / "record.jsonl", rows)
    res = androidgen.load_trace(f, tmp_path, {})
    t = res.trajectories[0]
    assert [s.action for s in t.steps] == ['finish(answer="fin")', 'click(element 8 "Café ✓")', "click(element 1)"]
    assert t.answer == "fin"  # a later step without an answer keeps it


def test_load_trace_checks_images_by_default(tmp_path):
    r = _row(tmp_path, "m", 0, raw=False)
    r["image"] = "m/none.png"
    f = _write_rows(tmp_path / "m" / "record.jsonl", [r])
    assert [e.field for e in androidgen.load_trace(f, tmp_path, {}).errors] == ["image"]


def test_only_a_record_jsonl_file_is_read_as_its_folder(tmp_path):
    _write_rows(tmp_path / "t" / "record.jsonl", [_row(tmp_path, "t", 0)])
    other = _write_rows(tmp_path / "t" / "notes.jsonl", ["{}"])
    assert androidgen.load(other).trajectories == []
    assert [t.id for t in androidgen.load(tmp_path / "t" / "record.jsonl").trajectories] == ["t"]


# ---------------------------------------------------------------- the judge's database.json (model/judge/judge.py)
def _project(root: Path, ids, database: dict | None) -> Path:
    """An AndroidGen project root as run.py (TRACE_DIR ./episodes, config.json) and judge.py (-d ./episodes
    -o ./database.json, judge.py L147-154) leave it."""
    for tid in ids:
        _androidgen(root / "episodes", tid, 3)
    if database is not None:
        (root / "database.json").write_text(json.dumps(database, ensure_ascii=False, indent=4))
    return root


def _entry(tid: str, complete: bool) -> dict:
    """An episode entry as judge.py L108-116 writes it."""
    return {"env": "android", "task": "What is the answer?", "init_state": "Home", "example": "# A reference example",
            "complete": complete, "record": f"./episodes/{tid}", "conditions": [["Open the app", 0]]}


def test_project_root_is_detected_and_reads_the_judges_labels(tmp_path):
    db = {"111": _entry("111", True), "222": _entry("222", False),
          # a sub-goal entry (judge.py L118-136): not an episode, never a label
          "111-0": {"env": "android", "task": "Open the app", "complete": True, "record": "./episodes/111", "step": 0}}
    root = _project(tmp_path / "proj", ["111", "222", "333"], db)  # 333: the judge could not verify it
    assert detect_format(root) == "androidgen"
    for given in (root, root / "episodes"):
        res = load_trajectories(given)
        assert res.errors == [] and {t.id: t.label for t in res.trajectories} == {"111": 1, "222": 0, "333": None}
    t = load_trajectories(root / "episodes" / "111").trajectories[0]
    assert t.label == 1 and t.answer == "done: 42" and t.platform == "android"
    assert FORMATS["androidgen"].screens == "before"


def test_database_option_and_labels_file_precedence(tmp_path):
    root = _project(tmp_path / "proj", ["111", "222"], None)
    other = tmp_path / "judged" / "db.json"
    other.parent.mkdir()
    other.write_text(json.dumps({"111": _entry("111", False), "222": {"complete": None}}))
    res = androidgen.load(root, database=other)
    assert {t.id: t.label for t in res.trajectories} == {"111": 0, "222": None}
    assert any("'complete': expected true or false" in w for w in res.warnings)
    (root / "episodes" / "labels.jsonl").write_text('{"trace_id": "111", "label": 1}\n')
    assert {t.id: t.label for t in androidgen.load(root, database=other).trajectories}["111"] == 1
    with pytest.raises(Exception, match="no such file"):
        androidgen.load(root, database=tmp_path / "none.json")
    (root / "database.json").write_text("{broken")
    res = androidgen.load(root)
    assert len(res.trajectories) == 2 and any("read no labels" in w for w in res.warnings)
