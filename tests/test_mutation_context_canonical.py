"""Edge tests for the context selector's duplicate handling and fingerprints (context.py), the
canonical writer (formats/canonical.py) and the shared loader pieces (formats/base.py)."""
import json
from pathlib import Path

import pytest
from PIL import Image

from adaptrubric_local.context import select_context, thumbnail_fingerprint, thumbnails_close
from adaptrubric_local.formats import base, canonical
from adaptrubric_local.formats.base import DataError, LoadResult
from adaptrubric_local.types import Step, Trajectory


def _traj(screens):
    return Trajectory(id="t", instruction="x", steps=[Step(screenshot=s, action="tap") for s in screens])


def test_exact_fingerprints_merge_only_equal_screens():
    # positions 3-4 show the same screen (exact fingerprint equality, no near_dup given)
    t = _traj(["a", "b", "c", "d", "d", "e"])
    sel = select_context(t, budget=4, fingerprint=lambda p: p)
    assert sel.indices == [0, 2, 4, 5] and sel.dropped_duplicates == [3]
    assert select_context(t, budget=4).indices == [0, 3, 4, 5]


def test_near_dup_decides_instead_of_equality():
    t = _traj(["10", "20", "30", "40", "41", "70"])
    fp = int
    close = select_context(t, budget=4, fingerprint=fp, near_dup=lambda a, b: abs(a - b) <= 1)
    assert close.indices == [0, 2, 4, 5] and close.dropped_duplicates == [3]
    exact = select_context(t, budget=4, fingerprint=fp)
    assert exact.indices == [0, 3, 4, 5] and exact.dropped_duplicates == []


def test_thumbnail_fingerprint_is_a_32px_box_averaged_grey_thumbnail(tmp_path):
    im = Image.new("RGB", (64, 64), (255, 255, 255))
    for x in range(0, 64, 2):
        for y in range(64):
            im.putpixel((x, y), (0, 0, 0))
    im.putpixel((1, 1), (0, 0, 0))
    path = tmp_path / "a.png"
    im.save(path)
    fp = thumbnail_fingerprint(str(path))
    assert len(fp) == 32 * 32
    assert fp == im.convert("L").resize((32, 32), Image.BOX).tobytes()
    assert fp[0] == 64 and fp[1] == 128  # a 2x2 box average, not a resampling filter's
    assert len(thumbnail_fingerprint(str(path), size=8)) == 64


def test_thumbnails_close_threshold():
    assert thumbnails_close(b"", b"") is True
    assert thumbnails_close(bytes([10, 20]), bytes([16, 14])) is True
    assert thumbnails_close(bytes([10, 20]), bytes([17, 20])) is False
    assert thumbnails_close(bytes([10]), bytes([10, 10])) is False
    assert thumbnails_close(bytes([10, 20]), bytes([17, 20]), tol=7) is True


# ---------------------------------------------------------------- canonical writer
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


# ---------------------------------------------------------------- base pieces
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
    assert str(ei.value) == f"{p}: malformed JSON (Expecting property name enclosed in double quotes at line 1)"
    assert ei.value.file == str(p)
    with pytest.raises(DataError) as ei:
        base.load_json(tmp_path / "missing.json")
    assert str(ei.value) == f"{tmp_path / 'missing.json'}: cannot read: No such file or directory"
    p.write_bytes('{"a": "é"}'.encode("utf-8"))
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
