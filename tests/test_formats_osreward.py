"""The OSReward loaders (formats/osreward.py, formats/osreward_androidworld.py) on output laid out as
OS-Copilot/OSReward's judge reads it (eval_pipeline/run_judge.py, eval_pipeline/README.md "Trace format") and
as its benchmarking samples are committed (benchmarking_analysis/data/raw/...): trace JSON in per-trace
folders, Parquet shards and the AndroidWorld JSONL."""
import io
import json
from pathlib import Path

import pytest

from adaptrubric_local import detect_format, load_trajectories
from adaptrubric_local.formats import FORMATS

from conftest import make_png

STEPS = [("I need to open the Settings app first.", "click(coordinate=[150, 608])", "click"),
         ("Search for dark mode.", "type(text='dark mode')", "type"),
         ("The toggle is off; I will click it.", "click(coordinate=[860, 448])", "click"),
         ("The toggle shows On. The task is complete.", "terminate(status='success')", "terminate")]


def _trace(folder: Path, trace_id: str, label="SUCCESS", steps=STEPS) -> Path:
    """One trace as eval_pipeline/example/example_trace.json lays it out: screenshots/step_NNNN.png beside it."""
    traj = []
    for i, (thought, action, meta) in enumerate(steps):
        make_png(folder / "screenshots" / f"step_{i:04d}.png", i)
        traj.append({"step_index": i, "screenshot_path": f"screenshots/step_{i:04d}.png", "raw_response": None,
                     "thought": thought, "action": action, "coordinate": None, "coordinate2": None,
                     "meta_action": meta})
    doc = {"trace_id": trace_id, "task_id": "SettingsEnableDarkMode_0", "platform": "Desktop",
           "agent": "example-agent", "instruction": "Turn on Dark Mode in the Settings app.", "trajectory": traj,
           "trajectory_length": len(traj), "human_label": label, "human_alignment": 1.0, "human_efficiency": 1.0}
    path = folder / f"{trace_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


def test_folder_of_per_trace_folders_resolves_paths_against_each_trace(tmp_path):
    traces = tmp_path / "traces"
    a = _trace(traces / "a", "example_dark_mode_0")
    _trace(traces / "b", "example_dark_mode_1", label="FAIL")
    (traces / ".hidden.json").write_text("{bad")  # run_judge.py skips dot-files
    (traces / "settings.json").write_text(json.dumps({"name": "not a trace"}))
    assert detect_format(traces) == "osreward"
    res = load_trajectories(traces)
    assert res.errors == []
    t0, t1 = res.trajectories
    assert (t0.id, t0.task_id, t0.platform, t0.label, t1.label) == (
        "example_dark_mode_0", "SettingsEnableDarkMode_0", "Desktop", 1, 0)
    assert t0.instruction == "Turn on Dark Mode in the Settings app."
    assert [s.screenshot for s in t0.steps] == [str((a.parent / "screenshots" / f"step_{i:04d}.png").resolve())
                                               for i in range(4)]
    assert [s.thought for s in t0.steps] == [s[0] for s in STEPS]
    assert [s.action_type for s in t0.steps] == ["click", "type", "click", "terminate"]
    assert [s.text for s in t0.steps] == [None, "dark mode", None, None] and t0.answer is None
    assert FORMATS["osreward"].screens == "before"


def test_answer_action_and_missing_screenshot(tmp_path):
    steps = [*STEPS[:3], ("The price is 42.", "answer(text='42')", "answer")]
    path = _trace(tmp_path, "q1", steps=steps)
    doc = json.loads(path.read_text())
    doc["trajectory"][1]["screenshot_path"] = None  # counted as missing by resolve_screenshots, not an error
    del doc["human_label"]
    path.write_text(json.dumps(doc))
    (t,) = load_trajectories(path).trajectories
    assert t.answer == "42" and t.steps[1].screenshot is None and t.label is None


def test_trace_errors_keep_the_others(tmp_path):
    _trace(tmp_path / "ok", "ok")
    bad = _trace(tmp_path / "bad", "bad")
    (bad.parent / "screenshots" / "step_0002.png").unlink()
    res = load_trajectories(tmp_path)
    assert [t.id for t in res.trajectories] == ["ok"]
    (err,) = res.errors
    assert (err.record_id, err.field) == ("bad", "trajectory[2].screenshot_path")
    assert "image not found" in err.problem


def _png_bytes(seed: int) -> bytes:
    buf = io.BytesIO()
    from PIL import Image
    Image.new("RGB", (8, 8), (seed, 0, 0)).save(buf, format="PNG")
    return buf.getvalue()


def _parquet(path: Path, rows: list[dict]) -> Path:
    """A shard with run_judge.py's PARQUET_METADATA_COLUMNS (L45-55) and `screenshots`."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    step = pa.struct([("step_index", pa.int64()), ("screenshot_path", pa.string()), ("thought", pa.string()),
                      ("action", pa.string()), ("meta_action", pa.string())])
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("trace_id", pa.string()), ("task_id", pa.string()), ("platform", pa.string()),
                        ("agent", pa.string()), ("instruction", pa.string()), ("frame_semantics", pa.string()),
                        ("trajectory_length", pa.int64()), ("trajectory", pa.list_(step)),
                        ("human_label", pa.string()), ("screenshots", pa.list_(image))])
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def _row(tid: str, shots: list, label="FAIL") -> dict:
    traj = [{"step_index": i, "screenshot_path": None, "thought": s[0], "action": s[1], "meta_action": s[2]}
            for i, s in enumerate(STEPS[:len(shots)])]
    return {"trace_id": tid, "task_id": "T", "platform": "Mobile", "agent": "a", "instruction": "Do it.",
            "frame_semantics": "before", "trajectory_length": len(traj), "trajectory": traj, "human_label": label,
            "screenshots": shots}


def test_parquet_shards_embedded_and_path_images(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = tmp_path / "parquet" / "full"
    make_png(data / "frames" / "f1.png", 1)
    shard = _parquet(data / "train-00000.parquet", [
        _row("p1", [{"bytes": _png_bytes(1), "path": "x.png"}, None, {"bytes": None, "path": "frames/f1.png"}]),
        _row("p2", [{"bytes": _png_bytes(2), "path": None}], label="SUCCESS")])
    assert detect_format(shard) == "osreward" and detect_format(tmp_path / "parquet") == "osreward"
    res = load_trajectories(tmp_path / "parquet")
    assert res.errors == []
    p1, p2 = res.trajectories
    assert (p1.id, p1.label, p2.label, p1.platform, p1.instruction) == ("p1", 0, 1, "Mobile", "Do it.")
    assert Path(p1.steps[0].screenshot).read_bytes() == _png_bytes(1)
    assert p1.steps[0].screenshot.startswith(str(tmp_path / "cache" / "adaptrubric-local" / "osreward-parquet"))
    assert p1.steps[1].screenshot is None
    assert p1.steps[2].screenshot == str((data / "frames" / "f1.png").resolve())
    assert p1.steps[1].text == "dark mode" and p1.steps[0].thought == STEPS[0][0]


def test_parquet_length_mismatch_is_that_rows_error(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    row = _row("p1", [None, None])
    row["trajectory"] = row["trajectory"][:1]
    res = load_trajectories(_parquet(tmp_path / "s.parquet", [row, _row("p2", [{"bytes": _png_bytes(3),
                                                                                 "path": None}])]))
    assert [t.id for t in res.trajectories] == ["p2"]
    (err,) = res.errors
    assert (err.record_id, err.field, err.problem) == ("p1", "screenshots", "2 screenshots for 1 steps")


# ---------------------------------------------------------------- AndroidWorld JSONL (aw-sample)
def _tool(args: dict) -> str:
    return json.dumps({"name": "mobile_use", "arguments": args})


AW_STEPS = [("swipe up to open the app drawer", "I swiped up.", {"action": "swipe", "coordinate": [547, 1928],
                                                                  "coordinate2": [547, 482]}),
            ("tap the orange Calendar icon", "I tapped Calendar.", {"action": "click", "coordinate": [179, 1097]}),
            ("type the titles", "I typed the titles.", {"action": "type", "text": "Movie nigh, Review"}),
            ("answer with the titles", "I answered.", {"action": "answer", "text": "Movie nigh, Review"})]


def _aw(root: Path, task: str, success, steps=AW_STEPS) -> dict:
    """One line as aw-sample.jsonl holds it: screenshots under <agent>/<task>/ beside results/."""
    traj = []
    for i, (thought, summary, args) in enumerate(steps):
        rel = f"qwen25vl-openmobile/{task}/screenshot_step{i}.png"
        make_png(root / rel, i)
        traj.append({"step": i, "screenshot_path": rel, "thought": thought, "action": json.dumps(summary),
                     "tool_call": _tool(args), "response": f"<thinking>\n{thought}\n</thinking>",
                     "step_history": f"Step {i + 1}: {json.dumps(summary)};"})
    return {"task_name": task, "goal": f"Goal of {task}", "save_dir": f"qwen25vl-openmobile/{task}",
            "task_success": success, "trajectory": traj}


def test_androidworld_jsonl_every_field(tmp_path):
    root = tmp_path / "aw-sample"
    lines = [_aw(root, "SimpleCalendarAnyEventsOnDate", 0), _aw(root, "ClockStopWatch", 1),
             _aw(root, "Unscored", None), _aw(root, "Partial", 0.5)]
    (root / "results").mkdir(parents=True)
    (root / "results" / "aw-sample.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    for given in (root, root / "results", root / "results" / "aw-sample.jsonl"):
        assert detect_format(given) == "osreward-androidworld"
        res = load_trajectories(given)
        assert res.errors == []
        assert {t.id: t.label for t in res.trajectories} == {
            "qwen25vl-openmobile/SimpleCalendarAnyEventsOnDate": 0, "qwen25vl-openmobile/ClockStopWatch": 1,
            "qwen25vl-openmobile/Unscored": None, "qwen25vl-openmobile/Partial": None}
        assert any("task_success 0.5" in w for w in res.warnings)
    t = res.trajectories[0]
    assert (t.instruction, t.task_id, t.platform, t.answer) == (
        "Goal of SimpleCalendarAnyEventsOnDate", "SimpleCalendarAnyEventsOnDate", "android", "Movie nigh, Review")
    assert [s.screenshot for s in t.steps] == [
        str((root / "qwen25vl-openmobile" / "SimpleCalendarAnyEventsOnDate" / f"screenshot_step{i}.png").resolve())
        for i in range(4)]
    assert [s.action_type for s in t.steps] == ["swipe", "tap", "type", "answer"]
    assert [s.text for s in t.steps] == [None, None, "Movie nigh, Review", None]
    assert t.steps[1].action == "click(coordinate=[179, 1097]) # I tapped Calendar."
    assert t.steps[0].thought == "swipe up to open the app drawer"
    assert FORMATS["osreward-androidworld"].screens == "before"


def test_androidworld_jsonl_bad_line_keeps_the_others(tmp_path):
    root = tmp_path / "aw"
    good, bad = _aw(root, "A", 1), _aw(root, "B", 0)
    (root / bad["trajectory"][1]["screenshot_path"]).unlink()
    (root / "results").mkdir(parents=True)
    (root / "results" / "r.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n{broken\n")
    res = load_trajectories(root)
    assert [t.id for t in res.trajectories] == ["qwen25vl-openmobile/A"]
    assert [(e.record, e.field, e.record_id) for e in res.errors] == [
        ("line 3", None, None), ("line 2", "trajectory[1].screenshot_path", "qwen25vl-openmobile/B")][::-1]
