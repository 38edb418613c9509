"""Data files are read and written as UTF-8 whatever the user's locale: each loader and the canonical
writer run under the ASCII "C" locale (a bare server or container) on text that is not ASCII."""
import json

from adaptrubric_local.formats import (
    base,
    canonical,
    detect_format,
    load_trajectories,
    others,
)
from adaptrubric_local.types import Step, Trajectory

TEXT = "Öffne «Café» ✓"


def _utf8(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def test_load_json_and_json_lines(tmp_path, ascii_locale):
    assert base.load_json(_utf8(tmp_path / "a.json", json.dumps({"t": TEXT}, ensure_ascii=False))) == {"t": TEXT}
    res = base.LoadResult()
    f = _utf8(tmp_path / "a.jsonl", json.dumps({"t": TEXT}, ensure_ascii=False) + "\n")
    assert list(base.iter_json_lines(f, res)) == [("line 1", {"t": TEXT})] and not res.errors


def test_canonical_write_and_load(tmp_path, ascii_locale):
    out = tmp_path / "new" / "data.jsonl"
    shot = str(tmp_path / "new" / "é.png")
    traj = Trajectory(id="é1", instruction=TEXT, steps=[Step(screenshot=shot, action=f"type({TEXT})")])
    canonical.write([traj], out)
    assert TEXT in out.read_bytes().decode("utf-8")  # written as UTF-8 text, not \u escapes
    assert detect_format(out.parent) == "canonical"
    res = load_trajectories(out, check_images=False)
    assert not res.errors
    assert [(t.id, t.instruction, t.steps[0].action, t.steps[0].screenshot) for t in res.trajectories] == [
        ("é1", TEXT, f"type({TEXT})", shot)]


def test_zerogui_text_files(tmp_path, ascii_locale):
    row = json.dumps({"step_num": 1, "action": "pyautogui.click(1, 2)"}) + "\n"
    one = tmp_path / "one"
    _utf8(one / "traj.jsonl", row)
    _utf8(one / "instruction.txt", f" {TEXT}\n")
    _utf8(one / "result.txt", "1\u00a0\n")  # a no-break space after the number
    two = tmp_path / "two"
    _utf8(two / "traj.jsonl", row)
    _utf8(two / "task.json", json.dumps({"instruction": TEXT}, ensure_ascii=False))
    res = others.load_zerogui(tmp_path, check_images=False)
    assert not res.errors
    assert [(t.id, t.instruction, t.label) for t in res.trajectories] == [("one", TEXT, 1), ("two", TEXT, None)]


def test_osreward_detected_from_non_ascii_json(tmp_path, ascii_locale):
    _utf8(tmp_path / "d" / "x.json", json.dumps([{"trace_id": "é", "trajectory": []}], ensure_ascii=False))
    assert detect_format(tmp_path / "d") == "osreward"
