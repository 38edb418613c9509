"""Exact-output tests for the AndroidGen loader (formats/androidgen.py) and the error texts of the
format detection: action descriptions, every trajectory field, warnings, and error locations."""
import json
from pathlib import Path

import pytest

from adaptrubric_local.formats import androidgen, canonical, detect_format, load_trajectories
from adaptrubric_local.formats.base import DataError
from adaptrubric_local.types import Step, Trajectory

from conftest import make_png

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
    ({"operation": "do", "action": "Click", "kwargs": {"element_id": 3}}, ('click(element 3 "Send now")', "tap", None, None)),
    ({"operation": "do", "action": "Long Press", "kwargs": {"element_id": 4}},
     (f'long_press(element 4 "{"x" * 60}")', "long_press", None, None)),
    ({"operation": "do", "action": "tap", "kwargs": {"element_id": 5}}, ("tap(element 5)", "tap", None, None)),
    ({"operation": "do", "action": "Click", "kwargs": {"element_id": 9}}, ("click(element 9)", "tap", None, None)),
    ({"operation": "do", "action": "Click"}, ("click(element None)", "tap", None, None)),
    ({"operation": "Swipe Up", "kwargs": {"dist": 3, "dir": "up"}}, ("swipe_up(dist=3, dir='up')", "swipe_up", None, None)),
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


def _write(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_trace_every_field_order_fallback_and_labels(tmp_path):
    rows = [_row(tmp_path, "tA", 2, response="r2", parsed_action={"operation": "exit", "kwargs": {"message": "m"}}),
            _row(tmp_path, "tA", 0, raw=False, response=5),
            _row(tmp_path, "tA", 1, index="one")]
    rows[2]["raw"] = "tA/missing_raw.png"
    f = _write(tmp_path / "tA" / "record.jsonl", rows)
    _write(tmp_path / "labels.jsonl", [{"trace_id": "tA", "label": "SUCCESS"}, {"label": 1}, "[1]", "{bad",
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
    _write(tmp_path / "folder" / "record.jsonl", rows)
    for given in (tmp_path, tmp_path / "folder", tmp_path / "folder" / "record.jsonl"):
        res = androidgen.load(given, check_images=True)
        assert [t.id for t in res.trajectories] == ["12"] and res.warnings == []
    assert detect_format(tmp_path / "folder" / "record.jsonl") == "androidgen"


def test_trace_errors(tmp_path):
    _write(tmp_path / "a" / "record.jsonl", [_row(tmp_path, "a", 0), "[1]", _row(tmp_path, "a", 2)])
    _write(tmp_path / "b" / "record.jsonl", [_row(tmp_path, "b", 0, trace_id="B7"), "{bad"])
    _write(tmp_path / "c" / "record.jsonl", [{k: v for k, v in _row(tmp_path, "c", 0).items() if k != "instruction"}])
    _write(tmp_path / "d" / "record.jsonl", [])
    r = _row(tmp_path, "e", 0, raw=False)
    r["image"] = "e/nothing.png"
    _write(tmp_path / "e" / "record.jsonl", [r])
    _write(tmp_path / "f" / "record.jsonl", [_row(tmp_path, "f", 0, instruction=" ")])
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
    _write(data / "t" / "record.jsonl", [{"instruction": "i", "image": str(shots / "x.png"), "index": 0}])
    assert androidgen.load(data).errors
    ok = androidgen.load(data, image_roots=[shots])
    assert ok.errors == [] and ok.trajectories[0].steps[0].screenshot == str((shots / "x.png").resolve())


def test_verdict_file_and_hint_messages(tmp_path):
    v = tmp_path / "verdicts.jsonl"
    v.write_text(json.dumps({"id": "a", "status": "ok", "score": 1}) + "\n")
    err = canonical.verdict_file_error(v)
    assert str(err) == (f"{v}: this looks like a verdict file (its lines have status/score fields and no steps), "
                        "not trajectory data; give the data that was scored (a canonical JSONL with id, "
                        "instruction and steps, or a folder in a supported format)")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "v1.jsonl").write_text(v.read_text())
    (folder / "v2.jsonl").write_text(v.read_text())
    deep = [folder / f"s{i}" / "data.jsonl" for i in range(6)] + [folder / "x" / "y" / "more.jsonl"]
    for p in deep:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"id": "t", "instruction": "x", "steps": []}) + "\n")
    (folder / "s0" / "record.jsonl").write_text("{}\n")
    (folder / "s1" / "verd.jsonl").write_text(v.read_text())
    listed = ", ".join(str(p) for p in sorted(deep[:6])[:5])
    with pytest.raises(DataError) as ei:
        load_trajectories(folder, fmt="canonical")
    assert ("v1.jsonl, v2.jsonl looks like a verdict file (what `score` writes), not trajectory data. "
            f"Trajectory data may be in: {listed}; pass that path instead") in str(ei.value)


def test_sort_order_answer_and_unicode_labels(tmp_path):
    rows = [_row(tmp_path, "u", 5, index="late", parsed_action={"operation": "exit", "kwargs": {"message": "fin"}}),
            _row(tmp_path, "u", 0, index=0, parsed_action={"action": "Click", "kwargs": {"element_id": 8}},
                 state='<element id="8">Café ✓</element>')]
    rows.append(_row(tmp_path, "u", 1, index=1))
    f = _write(tmp_path / "u" / "record.jsonl", rows)
    res = androidgen.load_trace(f, tmp_path, {})
    t = res.trajectories[0]
    assert [s.action for s in t.steps] == ['finish(answer="fin")', 'click(element 8 "Café ✓")', "click(element 1)"]
    assert t.answer == "fin"  # a later step without an answer keeps it


def test_load_trace_checks_images_by_default(tmp_path):
    r = _row(tmp_path, "m", 0, raw=False)
    r["image"] = "m/none.png"
    f = _write(tmp_path / "m" / "record.jsonl", [r])
    assert [e.field for e in androidgen.load_trace(f, tmp_path, {}).errors] == ["image"]


def test_only_a_record_jsonl_file_is_read_as_its_folder(tmp_path):
    _write(tmp_path / "t" / "record.jsonl", [_row(tmp_path, "t", 0)])
    other = _write(tmp_path / "t" / "notes.jsonl", ["{}"])
    assert androidgen.load(other).trajectories == []
    assert [t.id for t in androidgen.load(tmp_path / "t" / "record.jsonl").trajectories] == ["t"]


def test_hint_lists_deeper_data_but_not_other_formats_files(tmp_path):
    folder = tmp_path / "out"
    (folder / "a" / "b").mkdir(parents=True)
    (folder / "a" / "traj.jsonl").write_text("{}\n")
    (folder / "a" / "b" / "deep.jsonl").write_text("{}\n")
    with pytest.raises(DataError) as ei:
        load_trajectories(folder, fmt="canonical")
    assert str(ei.value) == (f"{folder}: no trajectories found: the canonical loader looked for "
                             f"{__import__('adaptrubric_local.formats', fromlist=['LOOKED_FOR']).LOOKED_FOR['canonical']}"
                             f". Trajectory data may be in: {folder / 'a' / 'b' / 'deep.jsonl'}; pass that path instead")


def test_verdict_file_sorted_first_does_not_hide_the_data(tmp_path):
    from conftest import canonical_record
    (tmp_path / "a_verdicts.jsonl").write_text(json.dumps({"id": "t0", "status": "ok", "score": 1}) + "\n")
    _write(tmp_path / "b_data.jsonl", [canonical_record(tmp_path, "t0", 2)])
    res = load_trajectories(tmp_path)
    assert [t.id for t in res.trajectories] == ["t0"]
    assert res.warnings == [f"{tmp_path / 'a_verdicts.jsonl'}: this looks like a verdict file, not trajectory data; "
                            "skipped it"]


def test_canonical_load_refuses_a_verdict_file(tmp_path):
    v = tmp_path / "verdicts.jsonl"
    v.write_text(json.dumps({"id": "a", "status": "ok", "score": 1}) + "\n")
    with pytest.raises(DataError) as ei:
        canonical.load(v)
    assert str(ei.value).startswith(f"{v}: this looks like a verdict file")
