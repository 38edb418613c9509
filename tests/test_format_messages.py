"""Exact messages of the loaders' shared checks (format names, missing paths, image roots, JSONL
lines, escaping screenshots, empty data) and every decision of format detection."""

import pytest

from adaptrubric_local.formats import DataError, detect_format, load_trajectories
from adaptrubric_local.formats.base import LoadResult, iter_json_lines, resolve_image

from conftest import make_png, write_jsonl


def _msg(exc_info, root):
    return str(exc_info.value).replace(str(root), "{d}")


def test_format_path_and_image_root_errors(tmp_path):
    make_png(tmp_path / "a.png", 1)
    with pytest.raises(ValueError) as ei:
        load_trajectories(tmp_path / "x.jsonl", fmt="csv")
    assert str(ei.value) == "unknown format 'csv'; choose one of canonical, androidgen, zerogui, osreward, clawgui or auto"
    for fmt in ("auto", "canonical"):
        with pytest.raises(DataError) as ei:
            load_trajectories(tmp_path / "missing.jsonl", fmt=fmt)
        assert _msg(ei, tmp_path) == "{d}/missing.jsonl: no such file or folder"
    ok = tmp_path / "ok.jsonl"
    write_jsonl(ok, [{"id": "a", "instruction": "x", "steps": [{"screenshot": "a.png"}]}])
    for bad in ("nope", "a.png"):
        with pytest.raises(DataError) as ei:
            load_trajectories(ok, image_roots=[tmp_path / bad])
        assert _msg(ei, tmp_path) == (f"{{d}}/{bad}: image root is not a folder (given as an extra folder "
                                      "screenshots may live in)")
    assert [t.id for t in load_trajectories(ok, image_roots=[tmp_path]).trajectories] == ["a"]
    folder = tmp_path / "data"
    folder.mkdir()
    write_jsonl(folder / "d.jsonl", [{"id": "b", "instruction": "x", "steps": [{"screenshot": "m.png"}]},
                                     {"id": "c", "instruction": "x", "steps": [{"screenshot": str(tmp_path / "a.png")}]}])
    res = load_trajectories(folder, check_images=False)  # missing images are not checked, escaping ones are
    assert [t.id for t in res.trajectories] == ["b"] and [e.record_id for e in res.errors] == ["c"]
    res = load_trajectories(folder, image_roots=[tmp_path])
    assert [t.id for t in res.trajectories] == ["c"] and [e.record_id for e in res.errors] == ["b"]


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


def test_empty_data_messages(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError) as ei:
        load_trajectories(tmp_path / "empty")
    assert _msg(ei, tmp_path) == (
        "{d}/empty: could not detect the format: looked for */record.jsonl (AndroidGen), traj.jsonl (ZeroGUI/OSWorld), "
        "episode.json (ClawGUI), *.jsonl (canonical), trace JSON (OSReward)")
    with pytest.raises(DataError) as ei:
        load_trajectories(tmp_path / "empty", fmt="zerogui")
    assert _msg(ei, tmp_path) == ("{d}/empty: no trajectories found: the zerogui loader looked for traj.jsonl "
                                  "(ZeroGUI/OSWorld result folders) anywhere below")
    (tmp_path / "e.jsonl").write_text("")
    with pytest.raises(DataError) as ei:
        load_trajectories(tmp_path / "e.jsonl")
    assert _msg(ei, tmp_path) == ('{d}/e.jsonl: no trajectories found: the canonical loader looked for one JSON '
                                  'trajectory per line ({"id", "instruction", "steps": [...]}) in *.jsonl')


@pytest.mark.parametrize("name, fmt", [("episode.json", "clawgui"), ("record.jsonl", "androidgen"),
                                       ("traj.jsonl", "zerogui"), ("x.jsonl", "canonical"), ("x.json", "osreward")])
def test_detect_format_of_a_file(tmp_path, name, fmt):
    (tmp_path / name).write_text("{}")
    assert detect_format(tmp_path / name) == fmt


def test_detect_format_of_folders(tmp_path):
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(DataError) as ei:
        detect_format(tmp_path / "x.txt")
    assert _msg(ei, tmp_path) == ("{d}/x.txt: unknown file type: expected .jsonl (canonical), .json (OSReward) "
                                  "or episode.json")

    def folder(name, files):
        d = tmp_path / name
        for rel, text in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
        return d

    assert detect_format(folder("ag1", {"record.jsonl": ""})) == "androidgen"
    assert detect_format(folder("ag2", {"555/record.jsonl": ""})) == "androidgen"
    assert detect_format(folder("zg1", {"traj.jsonl": ""})) == "zerogui"
    assert detect_format(folder("zg2", {"app/ex/deep/traj.jsonl": ""})) == "zerogui"
    assert detect_format(folder("cg", {"ep/sub/episode.json": "{}"})) == "clawgui"
    assert detect_format(folder("cn", {"data.jsonl": ""})) == "canonical"
    assert detect_format(folder("os1", {"a/t.json": '{"trace_id": 1, "trajectory": []}'})) == "osreward"
    assert detect_format(folder("os2", {"t.json": '[{"trace_id": 1, "trajectory": []}]', "bad.json": "{"})) == "osreward"
    many = {f"a{i:02d}.json": "{}" for i in range(20)}  # only the first 20 .json files are opened
    for name, files in {"n0": {**many, "z.json": '{"trace_id": 1, "trajectory": []}'},
                        "n1": {"t.json": "[]"}, "n2": {"t.json": '{"trace_id": 1}'},
                        "n3": {"t.json": '{"trajectory": []}'}, "n4": {"t.json": "{"}}.items():
        with pytest.raises(DataError, match="could not detect the format"):
            detect_format(folder(name, files))


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
    assert str(ei.value) == f"f.jsonl, record line 3, field 'success': label must be 0/1 (or SUCCESS/FAIL), got {value!r}"


def test_verdict_lines_are_recognised(tmp_path):
    from adaptrubric_local.formats.canonical import looks_like_verdicts

    def check(text):
        p = tmp_path / "v.jsonl"
        p.write_text(text, encoding="utf-8")
        return looks_like_verdicts(p)

    assert check('{"id": "a", "status": "ok", "score": 1}\n')
    assert check('\n{"id": "a", "status": "ok", "p_success": 0.5}\n')
    assert not check('{"id": "a", "status": "ok"}\n')  # no score or probability
    assert not check('{"id": "a", "score": 1}\n')  # no status
    assert not check('{"id": "a", "status": "ok", "score": 1, "steps": []}\n')  # data with extra fields
    assert not check('[{"status": "ok", "score": 1}]\n')
    assert check('not json\n{"id": "a", "status": "ok", "score": 1}\n')  # the first object decides
    assert not check('{"id": "a", "instruction": "x", "steps": []}\n{"id": "b", "status": "ok", "score": 1}\n')
    assert not check("")
    assert not looks_like_verdicts(tmp_path / "missing.jsonl")
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00")
    assert not looks_like_verdicts(tmp_path / "bin.jsonl")
