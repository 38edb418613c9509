"""The AndroidWorld loader (formats/androidworld.py) on a run folder of gzipped pickles laid out as
android_world's checkpointer writes them (tests/agent_runs.py cites the lines): every field, the PNGs
written from the arrays, a task that raised, and a pickle that would run code, refused by name."""
import io
import os
import pickle

import numpy as np
from agent_runs import androidworld_failed, androidworld_task, screen, write_pickle
from PIL import Image

from adaptrubric_local.formats import FORMATS, detect_format, load_trajectories
from adaptrubric_local.formats.androidworld import SafeUnpickler, read_pickle

GOAL = "What is the title of the note I saved today? Answer with the title."
ACTIONS = [{"action_type": "open_app", "app_name": "Markor"},
           {"action_type": "input_text", "text": "groceries", "index": 3},
           {"action_type": "answer", "text": "Groceries 2025"},
           {"action_type": "status", "goal_status": "complete"}]
REASONS = ["Open Markor.", "Search for the note.", "The title is visible.", "Done."]


def test_a_run_folder_with_every_field(tmp_path):
    run = tmp_path / "run_20250102T030405000000"
    androidworld_task(run, "MarkorNoteTitle_0", GOAL, ACTIONS, REASONS, seed=5)
    assert detect_format(run) == "androidworld" and FORMATS["androidworld"].screens == "before"
    res = load_trajectories(run)
    assert not res.errors and not res.warnings
    (t,) = res.trajectories
    assert (t.id, t.instruction, t.platform, t.task_id, t.label, t.answer) == (
        "MarkorNoteTitle_0", GOAL, "android", "MarkorNoteTitle", 1, "Groceries 2025")
    assert [(s.action_type, s.text, s.thought) for s in t.steps] == [
        ("open_app", None, "Open Markor."), ("input_text", "groceries", "Search for the note."),
        ("answer", None, "The title is visible."), ("status", None, "Done.")]
    assert t.steps[1].action == '{"action_type": "input_text", "index": 3, "text": "groceries"}'
    # each step's screenshot is the array recorded for it (the screen before its action), as a PNG
    for i, s in enumerate(t.steps):
        assert s.screenshot.startswith(str((run / ".adaptrubric-png").resolve()))
        assert np.array_equal(np.asarray(Image.open(s.screenshot)), screen(5 + i))
    # a folder of run folders: ids are the files' paths below it
    androidworld_task(tmp_path / "run_2", "MarkorNoteTitle_0", GOAL, ACTIONS, REASONS)
    assert detect_format(tmp_path) == "androidworld"
    assert [t.id for t in load_trajectories(tmp_path).trajectories] == [
        "run_2/MarkorNoteTitle_0", "run_20250102T030405000000/MarkorNoteTitle_0"]


def test_png_dir_and_cache(tmp_path):
    run = tmp_path / "run"
    androidworld_task(run, "T_0", GOAL, ACTIONS[:1], REASONS[:1])
    out = tmp_path / "pngs"
    (t,) = load_trajectories(run, options={"png_dir": out}).trajectories
    first = t.steps[0].screenshot
    assert first.startswith(str(out.resolve())) and os.path.isfile(first)
    androidworld_task(run, "T_0", GOAL, ACTIONS[:1], REASONS[:1], seed=9)  # the pickle changed: new frames
    (t2,) = load_trajectories(run, options={"png_dir": out}).trajectories
    assert t2.steps[0].screenshot != first
    assert np.array_equal(np.asarray(Image.open(t2.steps[0].screenshot)), screen(9))


def test_an_unwritable_png_folder_is_an_error_naming_it(tmp_path):
    androidworld_task(tmp_path / "run", "T_0", GOAL, ACTIONS[:1], REASONS[:1])
    (tmp_path / "file").write_text("")
    res = load_trajectories(tmp_path / "run", options={"png_dir": tmp_path / "file"})
    (err,) = res.errors
    assert err.record_id == "T_0" and "cannot write its screenshots as PNGs under" in err.problem
    assert "png_dir=DIR" in err.problem


def test_a_task_that_raised_is_not_a_failure(tmp_path):
    androidworld_task(tmp_path, "Good_0", GOAL, ACTIONS, REASONS, success=0.0)
    androidworld_failed(tmp_path, "Broken_0", GOAL)
    res = load_trajectories(tmp_path)
    assert [(t.id, t.label) for t in res.trajectories] == [("Good_0", 0)]
    (err,) = res.errors
    assert (err.record_id, err.field) == ("Broken_0", "episode_data") and "adb died" in err.problem
    (w,) = res.warnings
    assert "RuntimeError: adb died" in w and "label left empty, not 0" in w


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch " + str(_Boom.marker),))


def test_a_pickle_that_would_run_code_is_refused_by_name(tmp_path):
    _Boom.marker = tmp_path / "ran"
    write_pickle(tmp_path / "Evil_0.pkl.gz", [{"goal": GOAL, "episode_data": {"x": _Boom()}}])
    androidworld_task(tmp_path, "Good_0", GOAL, ACTIONS, REASONS)
    res = load_trajectories(tmp_path)
    assert [t.id for t in res.trajectories] == ["Good_0"]
    (err,) = res.errors
    assert err.record_id == "Evil_0" and f"refused {os.system.__module__}.system" in err.problem
    assert not _Boom.marker.exists()
    for name in ("builtins.eval", "subprocess.Popen", "numpy.load"):
        mod, attr = name.rsplit(".", 1)
        try:
            SafeUnpickler(io.BytesIO(b"")).find_class(mod, attr)
        except pickle.UnpicklingError as exc:
            assert f"refused {name}" in str(exc)
        else:
            raise AssertionError(name)
    assert isinstance(read_pickle(tmp_path / "Good_0.pkl.gz"), list)
