"""The canonical JSONL format (formats/canonical.py): reading (every bad record has its own exact error
and the good ones still load), record ids, verdict files refused, and the writer (paths relative to
the JSONL folder, every field kept, images outside its folder refused)."""
import json
import os
from pathlib import Path

import pytest

from adaptrubric_local import DataError, Step, Trajectory, load_trajectories
from adaptrubric_local.formats import canonical

from conftest import canonical_record, make_png, write_jsonl

S = {"screenshot": "a.png", "action": "tap(1)"}


CASES = [  # (record, error after "{file}, record line N")
    ([1, 2], ": expected a JSON object, got list"),
    ({"id": "r", "instruction": "x"}, " (id r), field 'steps': required field missing"),
    ({"id": "r", "instruction": "x", "steps": "a.png"}, " (id r), field 'steps': expected list, got str"),
    ({"id": "r", "instruction": "x", "steps": [S], "extra": 1, "more": 2},
     (" (id r): unknown keys ['extra', 'more']; allowed: ['answer', 'id', 'instruction', 'label', 'platform', "
      "'steps', 'task_id']")),
    ({"id": "r", "instruction": "x", "stpes": [S]},  # misspelled: named, not `steps` missing
     (" (id r): unknown keys ['stpes'] (did you mean 'steps' for 'stpes'?); allowed: ['answer', 'id', "
      "'instruction', 'label', 'platform', 'steps', 'task_id']")),
    ({"id": "r", "instruction": "x", "steps": [{**S, "acton": "tap(2)"}]},
     (" (id r), field 'steps[0]': unknown step keys ['acton'] (did you mean 'action' for 'acton'?); allowed: "
      "['action', 'action_type', 'screenshot', 'text', 'thought']")),
    ({"id": "r", "instruction": "x", "steps": [S, 1]}, " (id r), field 'steps[1]': step must be a JSON object"),
    ({"id": "r", "instruction": "x", "steps": [{**S, "foo": 1}]},
     (" (id r), field 'steps[0]': unknown step keys ['foo']; allowed: ['action', 'action_type', 'screenshot', "
      "'text', 'thought']")),
    ({"id": "r", "instruction": "x", "steps": [{"screenshot": "nope.png"}]},
     " (id r), field 'steps[0].screenshot': image not found: {root}/nope.png"),
    ({"id": "r", "instruction": "x", "steps": [{"screenshot": 5}]},
     " (id r), field 'steps[0].screenshot': image path missing or not a string"),
    ({"id": "r", "instruction": "x", "steps": [S, {**S, "action_type": ["tap"]}]},
     " (id r), field 'steps[1].action_type': expected a string, got list"),
    ({"id": "r", "instruction": "x", "steps": [{**S, "text": True}]},
     " (id r), field 'steps[0].text': expected a string, got bool"),
    ({"id": "r", "instruction": "x", "steps": [{**S, "thought": {}}]},
     " (id r), field 'steps[0].thought': expected a string, got dict"),
    ({"id": ["r"], "instruction": "x", "steps": [S]}, " (id ['r']), field 'id': expected str or int, got list"),
    ({"id": "r", "steps": [S]}, " (id r), field 'instruction': required field missing"),
    ({"id": "r", "instruction": 3, "steps": [S]}, " (id r), field 'instruction': expected str, got int"),
    ({"id": "r", "instruction": "x", "steps": [S], "answer": {"a": 1}},
     " (id r), field 'answer': expected a string, got dict"),
    ({"id": "r", "instruction": "x", "steps": [S], "platform": [1]},
     " (id r), field 'platform': expected a string, got list"),
    ({"id": "r", "instruction": "x", "steps": [S], "task_id": False},
     " (id r), field 'task_id': expected a string, got bool"),
    ({"id": "r", "instruction": "x", "steps": [S], "label": "maybe"},
     " (id r), field 'label': label must be 0/1 (or SUCCESS/FAIL), got 'maybe'"),
    ({"id": "r", "instruction": "x", "steps": []}, " (id r), field 'steps': trajectory has no steps"),
    ({"id": "r", "instruction": "x", "steps": [{"action": "tap"}]},
     " (id r), field 'steps': trajectory has no screenshots"),
    ({"id": "r", "instruction": "  ", "steps": [S]}, " (id r), field 'instruction': instruction is empty"),
]


GOOD = {"id": 17, "instruction": "Do it.", "answer": 42, "platform": "android", "task_id": "t", "label": "SUCCESS",
        "steps": [{"screenshot": "a.png", "action": {"name": "tap", "x": "é"}, "action_type": "tap", "text": "hi",
                   "thought": 3.5}, {"action": "wait"}, {"screenshot": "a.png"}]}


def test_each_bad_record_has_its_exact_error_and_the_good_one_loads(tmp_path):
    make_png(tmp_path / "a.png", 1)
    p = tmp_path / "data.jsonl"
    write_jsonl(p, [r for r, _ in CASES] + [GOOD])
    res = canonical.load(p)
    assert [str(e) for e in res.errors] == [f"{p}, record line {n}" + msg.format(root=tmp_path)
                                             for n, (_, msg) in enumerate(CASES, start=1)]
    assert [e.record_id for e in res.errors] == [None] + ["r"] * 12 + [None] + ["r"] * 9
    shot = str(tmp_path / "a.png")
    assert res.trajectories == [Trajectory(
        id="17", instruction="Do it.", answer="42", platform="android", task_id="t", label=1,
        steps=[Step(screenshot=shot, action='{"name": "tap", "x": "é"}', action_type="tap", text="hi", thought="3.5"),
               Step(screenshot=None, action="wait"), Step(screenshot=shot, action="")])]  # no action: ""
    assert res.trajectories[0].source == str(p)


def test_a_repeated_id_is_an_error_on_the_later_line(tmp_path):
    make_png(tmp_path / "a.png", 1)
    p = tmp_path / "data.jsonl"
    rec = {"id": "a", "instruction": "x", "steps": [S]}
    write_jsonl(p, [rec, {**rec, "instruction": "y"}, {**rec, "id": "b"}])
    res = canonical.load(p)
    assert [(t.id, t.instruction) for t in res.trajectories] == [("a", "x"), ("b", "x")]
    assert [str(e) for e in res.errors] == [f"{p}, record line 2, field 'id': duplicate id 'a'"]
    assert res.errors[0].record_id is None  # the id belongs to the record that loaded


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


def test_canonical_record_ids_follow_the_record(tmp_path):
    good = canonical_record(tmp_path, "good", 1)
    intid = {**canonical_record(tmp_path, "x", 1), "id": 7, "oops": 1}
    noid = {k: v for k, v in canonical_record(tmp_path, "y", 1).items() if k != "id"}
    listid = {**canonical_record(tmp_path, "z", 1), "id": ["no"]}
    path = write_jsonl(tmp_path / "d.jsonl", [good, "{broken", intid, noid, listid, good])
    res = load_trajectories(path)
    assert [t.id for t in res.trajectories] == ["good"]
    ids = {e.record: e.record_id for e in res.errors}
    assert ids["line 2"] is None  # unparseable: no id to keep
    assert ids["line 3 (id 7)"] == "7"
    assert ids["line 4"] is None and ids["line 5 (id ['no'])"] is None
    dup = next(e for e in res.errors if "duplicate" in str(e))
    assert dup.record_id is None  # the id belongs to the record that loaded; the error keeps its line


# ------------------------------------------------------------------ the writer
def _rich(root: Path) -> list[Trajectory]:
    steps = [Step(screenshot=make_png(root / "sub" / "img" / f"{i}.png", i), action=f"tap({i})",
                  action_type="tap" if i % 2 else None, text="héllo" if i == 1 else None,
                  thought=f"step {i}\nline two" if i else None) for i in range(3)]
    steps.append(Step(screenshot=None, action="finish('42')", action_type="answer"))
    return [Trajectory(id="r1", instruction="Say 42 — ünïcode.", steps=steps, answer="42", platform="android",
                       task_id="t1", label=0),
            Trajectory(id="r2", instruction="Second", steps=steps[:1], answer="", label=1),
            Trajectory(id="r3", instruction="Third", steps=steps[2:3])]


@pytest.mark.parametrize("where", ["beside", "above"])
def test_writer_writes_paths_relative_to_the_jsonl_folder(where, tmp_path):
    trajs = _rich(tmp_path)
    out = tmp_path / "sub" / "w.jsonl" if where == "beside" else tmp_path / "w.jsonl"
    canonical.write(trajs, out)
    for line in out.read_text(encoding="utf-8").splitlines():
        for s in json.loads(line)["steps"]:
            if "screenshot" in s:
                assert not os.path.isabs(s["screenshot"]) and not s["screenshot"].startswith("..")
                assert (out.parent / s["screenshot"]).resolve().is_file()
    assert str(tmp_path) not in out.read_text(encoding="utf-8")


def test_writer_round_trip_keeps_every_field_of_every_step(tmp_path):
    trajs = _rich(tmp_path)
    out = tmp_path / "w.jsonl"
    canonical.write(trajs, out)
    again = load_trajectories(out)
    assert not again.errors and not again.warnings
    assert again.trajectories == trajs  # every field of every trajectory and step (source aside)
    canonical.write(again.trajectories, tmp_path / "w2.jsonl")
    assert (tmp_path / "w2.jsonl").read_text(encoding="utf-8") == out.read_text(encoding="utf-8")


def test_writer_resolves_relative_screenshots_from_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_png(tmp_path / "img" / "a.png", 1)
    t = Trajectory(id="rel", instruction="x", steps=[Step(screenshot="img/a.png", action="tap")])
    with pytest.raises(ValueError, match="outside"):
        canonical.write([t], tmp_path / "out" / "w.jsonl")
    canonical.write([t], tmp_path / "w.jsonl")
    again = load_trajectories(tmp_path / "w.jsonl")
    assert again.trajectories[0].steps[0].screenshot == str((tmp_path / "img" / "a.png").resolve())


def test_writer_refuses_images_outside_its_folder(tmp_path):
    trajs = _rich(tmp_path)
    with pytest.raises(ValueError, match="outside"):
        canonical.write(trajs, tmp_path / "other" / "w.jsonl")
    sibling = Trajectory(id="p", instruction="x",
                         steps=[Step(screenshot=make_png(tmp_path / "sub2" / "a.png", 1), action="tap")])
    with pytest.raises(ValueError, match="outside"):  # a sibling sharing the prefix is outside too
        canonical.write([sibling], tmp_path / "sub" / "w.jsonl")


def test_writer_keeps_unicode_and_makes_folders(tmp_path):
    out = tmp_path / "a" / "b" / "data.jsonl"
    canonical.write([], out)
    assert out.read_bytes() == b""
    t = Trajectory(id="é1", instruction="Écris « bonjour »", steps=[Step(screenshot=None, action="tape ✓")])
    canonical.write([t], out)
    line = out.read_bytes().decode("utf-8")
    assert line == json.dumps(t.to_dict(), ensure_ascii=False) + "\n" and "«" in line


def test_writer_error_names_the_file_and_trajectory(tmp_path):
    outside = tmp_path / "elsewhere.png"
    out = tmp_path / "sub" / "data.jsonl"
    t = Trajectory(id="t9", instruction="x", steps=[Step(screenshot=str(outside), action="tap")])
    with pytest.raises(ValueError) as ei:
        canonical.write([t], out)
    assert str(ei.value) == (f"{out}, trajectory t9: screenshot {outside} lies outside {out.parent.resolve()}; "
                             "write the JSONL into a folder that contains its images")


def test_canonical_load_refuses_a_verdict_file(tmp_path):
    v = tmp_path / "verdicts.jsonl"
    v.write_text(json.dumps({"id": "a", "status": "ok", "score": 1}) + "\n")
    with pytest.raises(DataError) as ei:
        canonical.load(v)
    assert str(ei.value).startswith(f"{v}: this looks like a verdict file")


def test_canonical_records_that_are_not_objects_or_lack_steps(tmp_path):
    p = tmp_path / "data.jsonl"
    p.write_text('[1, 2]\n{"id": "t1", "instruction": "x"}\n{"id": "t2", "instruction": "x", "steps": []}\n')
    res = canonical.load(p)
    assert res.trajectories == []
    assert [str(e) for e in res.errors] == [
        f"{p}, record line 1: expected a JSON object, got list",
        f"{p}, record line 2 (id t1), field 'steps': required field missing",
        f"{p}, record line 3 (id t2), field 'steps': trajectory has no steps"]
    assert [e.record_id for e in res.errors] == [None, "t1", "t2"]
