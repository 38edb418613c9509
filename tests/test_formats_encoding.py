"""Data files are read and written as UTF-8 whatever the user's locale: each loader and the canonical
writer run under the ASCII "C" locale (a bare server or container) on text that is not ASCII."""
import json

from adaptrubric_local.formats import (
    base,
    canonical,
    detect_format,
    load_trajectories,
    osworld,
    zerogui,
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
    row = json.dumps({"step_num": 1, "action": "DONE", "output_text": f"Thought: {TEXT}\nAction: finished("
                      f"content='{TEXT}')"}, ensure_ascii=False) + "\n"
    one = tmp_path / "one"
    _utf8(one / "traj.jsonl", row)
    _utf8(one / "config.json", json.dumps({"instruction": TEXT}, ensure_ascii=False, indent=4))
    _utf8(one / "result.txt", "1\u00a0\n")  # a no-break space after the number
    res = zerogui.load(tmp_path, check_images=False)
    assert not res.errors
    assert [(t.id, t.instruction, t.label, t.answer, t.steps[0].thought) for t in res.trajectories] == [
        ("one", TEXT, 1, TEXT, TEXT)]


def test_osworld_task_json(tmp_path, ascii_locale):
    _utf8(tmp_path / "evaluation_examples" / "examples" / "os" / "t1.json",
          json.dumps({"instruction": TEXT}, ensure_ascii=False))
    run = tmp_path / "results" / "pyautogui" / "screenshot" / "m" / "os" / "t1"
    _utf8(run / "traj.jsonl", json.dumps({"step_num": 1, "action": f"pyautogui.write('{TEXT}')",
                                          "response": TEXT, "screenshot_file": "step_1_x.png"},
                                         ensure_ascii=False) + "\n")
    res = osworld.load(tmp_path / "results", check_images=False)
    assert [(t.instruction, t.steps[0].text, t.steps[0].thought) for t in res.trajectories] == [(TEXT, TEXT, TEXT)]


def test_osreward_detected_from_non_ascii_json(tmp_path, ascii_locale):
    _utf8(tmp_path / "d" / "x.json", json.dumps([{"trace_id": "é", "trajectory": []}], ensure_ascii=False))
    assert detect_format(tmp_path / "d") == "osreward"
