"""The loaders' shared checks (formats/base.py): screenshots contained in the data folder or an allowed
image root (symlinks, prefixes, `..`), JSONL lines and their warnings, labels, record ids, and the
text and pickling of DataError."""
from pathlib import Path

import pytest

from adaptrubric_local import DataError, detect_format, load_trajectories
from adaptrubric_local.formats import base
from adaptrubric_local.formats.base import LoadResult, iter_json_lines, resolve_image

from conftest import FORMATS, canonical_record, make_dataset, make_png, write_jsonl


def test_json_lines_errors_and_warnings(tmp_path):
    p = tmp_path / "lines.jsonl"
    p.write_text('{"a": 1}\n{"a": 2} {"a": 3}\n{"a": 4}\x0c\n{"a": \n\n  \n[5]\n{"a": 6}X\n')
    res = LoadResult()
    assert list(iter_json_lines(p, res)) == [("line 1", {"a": 1}), ("line 2", {"a": 2}), ("line 2", {"a": 3}),
                                             ("line 3", {"a": 4}), ("line 7", [5])]
    assert [str(e) for e in res.errors] == [f"{p}, record line 4: malformed JSON (Expecting value at column 6)",
                                            f"{p}, record line 8: malformed JSON (Expecting value at column 9)"]
    assert res.warnings == [
        f"{p}: line 2 holds 2 JSON objects; read them as separate records",
        f"{p}: line 3 is not strict JSONL (stray characters after the object); read the object and ignored them"]


def test_a_truncated_line_says_where_its_string_starts(tmp_path):
    p = tmp_path / "cut.jsonl"
    p.write_text('{"id": "a", "instruction": "Turn on\n')  # a line cut mid-string (a run killed while writing)
    res = LoadResult()
    assert list(iter_json_lines(p, res)) == []
    assert str(res.errors[0]) == (f"{p}, record line 1 (id a): malformed JSON (Unterminated string starting at "
                                  "column 28)")


def _msg(exc_info, root):
    return str(exc_info.value).replace(str(root), "{d}")


def test_escaping_screenshot_message(tmp_path):
    with pytest.raises(DataError) as ei:
        resolve_image(tmp_path, "../b.png", tmp_path / "f.jsonl", "line 1", "steps[0].screenshot")
    assert _msg(ei, tmp_path) == (
        f"{{d}}/f.jsonl, record line 1, field 'steps[0].screenshot': image path '../b.png' escapes the dataset "
        f"folder: it resolves to {tmp_path.parent / 'b.png'}, outside the allowed folders ({{d}}: the dataset folder "
        "and any extra image roots). If these images are meant to be read, pass --image-root DIR "
        "(Python: image_roots=[DIR])")
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(DataError) as ei:  # every allowed folder is listed
        resolve_image(tmp_path, "../b.png", tmp_path / "f.jsonl", "line 1", "s", image_roots=[other])
    assert f"outside the allowed folders ({tmp_path}, {other}: the dataset folder" in str(ei.value)
    with pytest.raises(DataError) as ei:  # by default the image must exist
        resolve_image(tmp_path, "nope.png", tmp_path / "f.jsonl", "line 1", "s")
    assert str(ei.value) == f"{tmp_path}/f.jsonl, record line 1, field 's': image not found: {tmp_path}/nope.png"
    assert resolve_image(tmp_path, "nope.png", tmp_path / "f.jsonl", "line 1", "s", must_exist=False) == str(
        tmp_path / "nope.png")


@pytest.mark.parametrize("value, label", [
    (None, None), (True, 1), (False, 0), (1, 1), (0, 0), (1.0, 1), (0.0, 0),
    *[(s, 1) for s in ("1", "success", "Successful", " PASS ", "passed", "true", "Yes")],
    *[(s, 0) for s in ("0", "fail", "FAILED", "failure", "false", "no ")]])
def test_labels_read(value, label):
    from adaptrubric_local.formats.base import parse_label

    got = parse_label(value, "f.jsonl", "line 1", "label")
    assert got == label and (got is None or type(got) is int)


@pytest.mark.parametrize("value", [2, 0.5, -1, "maybe", "", [1], {"a": 1}])
def test_bad_labels_are_named(value):
    from adaptrubric_local.formats.base import parse_label

    with pytest.raises(DataError) as ei:
        parse_label(value, "f.jsonl", "line 3", "success")
    assert str(ei.value) == (f"f.jsonl, record line 3, field 'success': label must be 0/1 (or SUCCESS/FAIL), "
                             f"got {value!r}")


# ------------------------------------------------------------------ containment and extra roots
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_loader_refuses_outside_images_unless_the_root_is_allowed(fmt, tmp_path):
    data, shots = tmp_path / "data", tmp_path / "shots"
    path, tid = make_dataset(fmt, data, shots=shots)
    assert detect_format(path) == fmt
    refused = load_trajectories(path)
    assert not refused.trajectories and len(refused.errors) == 1
    msg = str(refused.errors[0])
    assert "escapes the dataset folder" in msg and "--image-root" in msg
    assert str(data.resolve()) in msg or str(path.resolve().parent) in msg  # names the allowed root
    allowed = load_trajectories(path, image_roots=[shots])
    assert not allowed.errors, allowed.errors
    (t,) = allowed.trajectories
    assert t.id == tid and all(Path(s).is_relative_to(shots.resolve()) for s in t.screenshots)
    assert all(Path(s).is_file() for s in t.screenshots)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_loader_accepts_relative_paths_with_extra_roots_given(fmt, tmp_path):
    path, tid = make_dataset(fmt, tmp_path / "data")
    (tmp_path / "elsewhere").mkdir()
    res = load_trajectories(path, image_roots=[tmp_path / "elsewhere"])
    assert [t.id for t in res.trajectories] == [tid] and not res.errors
    assert all(Path(s).is_relative_to((tmp_path / "data").resolve()) for s in res.trajectories[0].screenshots)


def test_absolute_path_inside_the_data_folder_is_accepted(tmp_path):
    data = tmp_path / "data"
    rec = canonical_record(data, "abs", 2)
    rec["steps"][0]["screenshot"] = str((data / rec["steps"][0]["screenshot"]).resolve())
    res = load_trajectories(write_jsonl(data / "d.jsonl", [rec]))
    assert not res.errors and res.trajectories[0].steps[0].screenshot == rec["steps"][0]["screenshot"]


def test_sibling_folder_sharing_the_prefix_is_refused(tmp_path):
    data, sibling = tmp_path / "data", tmp_path / "data2"
    ok = canonical_record(data, "ok", 1)
    by_abs = canonical_record(data, "abs", 1)
    by_abs["steps"][0]["screenshot"] = make_png(sibling / "x.png", 1)
    by_rel = canonical_record(data, "rel", 1)
    by_rel["steps"][0]["screenshot"] = "../data2/x.png"
    path = write_jsonl(data / "d.jsonl", [ok, by_abs, by_rel])
    res = load_trajectories(path)
    assert [t.id for t in res.trajectories] == ["ok"]
    assert len(res.errors) == 2 and all("escapes the dataset folder" in str(e) for e in res.errors)
    # the same holds for an extra root: allowing shots/ does not allow shots2/
    shots2 = make_png(tmp_path / "shots2" / "y.png", 2)
    (tmp_path / "shots").mkdir()
    rec = canonical_record(data, "r2", 1)
    rec["steps"][0]["screenshot"] = shots2
    res = load_trajectories(write_jsonl(data / "e.jsonl", [rec]), image_roots=[tmp_path / "shots"])
    assert not res.trajectories and "escapes the dataset folder" in str(res.errors[0])


def test_symlink_escaping_the_root_is_refused(tmp_path):
    data, outside = tmp_path / "data", tmp_path / "outside"
    target = Path(make_png(outside / "real.png", 3))
    rec = canonical_record(data, "link", 2)
    (data / "img" / "link.png").symlink_to(target)
    rec["steps"][1]["screenshot"] = "img/link.png"
    (data / "dirlink").symlink_to(outside, target_is_directory=True)
    rec2 = canonical_record(data, "dirlink", 1)
    rec2["steps"][0]["screenshot"] = "dirlink/real.png"
    path = write_jsonl(data / "d.jsonl", [rec, rec2])
    res = load_trajectories(path)
    assert not res.trajectories and len(res.errors) == 2
    assert all("escapes the dataset folder" in str(e) for e in res.errors)
    res = load_trajectories(path, image_roots=[outside])  # allowed explicitly: fine
    assert not res.errors and res.trajectories[0].steps[1].screenshot == str(target.resolve())


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", "file:///etc/passwd", "img/../../x.png"])
def test_paths_leaving_the_data_folder_are_refused(bad, tmp_path):
    rec = canonical_record(tmp_path / "data", "esc", 2)
    rec["steps"][1]["screenshot"] = bad
    res = load_trajectories(write_jsonl(tmp_path / "data" / "d.jsonl", [rec]), check_images=False)
    assert not res.trajectories and "escapes the dataset folder" in str(res.errors[0])
    assert res.errors[0].field == "steps[1].screenshot"


def test_an_image_root_that_is_not_a_folder_is_an_error(tmp_path):
    path, _ = make_dataset("canonical", tmp_path / "data")
    with pytest.raises(DataError, match="image root"):
        load_trajectories(path, image_roots=[tmp_path / "nope"])


def test_data_error_survives_pickling():
    import pickle

    e = DataError("f.jsonl", "image not found", "line 3", "steps[0].screenshot", record_id="abc")
    e2 = pickle.loads(pickle.dumps(e))
    assert (str(e2), e2.record_id, e2.field, e2.record, e2.file) == (str(e), "abc", e.field, e.record, e.file)


# ------------------------------------------------------------------ record ids, load results, JSON, DataError
def test_own_id():
    assert base.own_id("  ") is None and base.own_id("") is None
    assert base.own_id(" a ") == " a " and base.own_id(0) == "0"
    assert base.own_id(True) is None and base.own_id(1.0) is None and base.own_id(None) is None


def test_load_result_extend_keeps_both_sides():
    a = LoadResult(trajectories=["t1"], errors=["e1"], warnings=["w1"])
    a.extend(LoadResult(trajectories=["t2"], errors=["e2"], warnings=["w2"]))
    assert (a.trajectories, a.errors, a.warnings) == (["t1", "t2"], ["e1", "e2"], ["w1", "w2"])


def test_load_json_errors(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"a": 1,}')
    with pytest.raises(DataError) as ei:
        base.load_json(p)
    assert str(ei.value) == (f"{p}: malformed JSON (Expecting property name enclosed in double quotes at line 1, "
                             "column 9)")
    assert ei.value.file == str(p)
    with pytest.raises(DataError) as ei:
        base.load_json(tmp_path / "missing.json")
    assert str(ei.value) == f"{tmp_path / 'missing.json'}: cannot read: No such file or directory"
    p.write_bytes('{"a": "é"}'.encode())
    assert base.load_json(p) == {"a": "é"}


def test_data_error_text():
    e = DataError("f.jsonl", "bad", "line 2", "steps", "r1")
    assert str(e) == "f.jsonl, record line 2, field 'steps': bad"
    assert (e.file, e.problem, e.record, e.field, e.record_id) == ("f.jsonl", "bad", "line 2", "steps", "r1")
    assert str(DataError(Path("f.jsonl"), "bad", field="id")) == "f.jsonl, field 'id': bad"
    assert str(DataError("f.jsonl", "bad")) == "f.jsonl: bad"
    t = base.tag(DataError("f", "p", record_id="own"), "other")
    assert t.record_id == "own"
    assert base.tag(DataError("f", "p"), 5).record_id == "5"


def test_a_truncated_record_keeps_the_id_it_names_first(tmp_path):
    """A line cut short by a killed writer still names its id when the id came first and is complete: the
    error (and the error verdict scoring writes) is that record's, so `score --resume` retries it once the
    line is mended; an id cut short itself, or not the first key, leaves the record its line."""
    p = tmp_path / "cut.jsonl"
    p.write_text('{"id": "t7", "instruction": "Turn on\n{"id": 12, "steps": [\n{"id": "t9\n'
                 '{"instruction": "x", "id": "t10", \n{"a": 1} {"id": "t11", \n')
    res = LoadResult()
    assert list(iter_json_lines(p, res)) == []
    assert [e.record_id for e in res.errors] == ["t7", "12", None, None, None]
    assert str(res.errors[0]) == (f"{p}, record line 1 (id t7): malformed JSON (Unterminated string starting at "
                                  "column 29)")
