"""Loader hardening: image-path containment with extra roots, "nothing loaded" as an error, bad
records keeping their own ids, and the canonical writer's paths and round trip."""
import json
import os
from pathlib import Path

import pytest

from adaptrubric_local import DataError, Step, Trajectory, Verdict, detect_format, load_trajectories
from adaptrubric_local.formats import canonical

from conftest import canonical_record, make_png, write_jsonl

FORMATS = ("canonical", "androidgen", "zerogui", "osreward", "clawgui")


# ------------------------------------------------------------------ one small data set per format
def _shot(root: Path, shots: Path | None, rel: str, seed: int) -> str:
    """Write a frame; return how a record names it: relative to `root`, or absolute under `shots`."""
    if shots is None:
        make_png(root / rel, seed)
        return rel
    return make_png(shots / rel, seed)


def make_dataset(fmt: str, root: Path, shots: Path | None = None, missing: bool = False) -> tuple[Path, str]:
    """A one-trajectory data set in `fmt` under `root`: (path to load, the trajectory's id).
    `shots`: images live there and records name them by absolute path. `missing`: step 1's image
    does not exist."""
    root.mkdir(parents=True, exist_ok=True)

    def shot(rel, i):
        name = _shot(root, shots, rel, i)
        if missing and i == 1:
            (shots / rel if shots else root / rel).unlink()
        return name

    if fmt == "canonical":
        steps = [{"screenshot": shot(f"img/c_{i}.png", i), "action": f"tap({i})"} for i in range(3)]
        return write_jsonl(root / "d.jsonl", [{"id": "c1", "instruction": "Turn on Wi-Fi.", "steps": steps}]), "c1"
    if fmt == "androidgen":
        rows = [{"instruction": "Open the clock.", "index": i, "trace_id": 555,
                 "image": shot(f"555/s/{i}.png", i), "parsed_action": {"operation": "do", "action": "Click",
                                                                       "kwargs": {"element_id": "1"}}}
                for i in range(3)]
        write_jsonl(root / "555" / "record.jsonl", rows)
        return root, "555"
    if fmt == "zerogui":
        ex = root / "app" / "ex1"
        rows = [{"step_num": i, "action": "pyautogui.click(1, 2)", "instruction": "Open the menu.",
                 "screenshot_file": shot(f"app/ex1/step_{i}.png", i) if shots else
                 Path(shot(f"app/ex1/step_{i}.png", i)).name} for i in range(1, 3)]
        write_jsonl(ex / "traj.jsonl", rows)
        return root, "app/ex1"
    if fmt == "osreward":
        doc = {"trace_id": "tr-9", "instruction": "Open settings",
               "trajectory": [{"screenshot_path": shot(f"shots/{i}.png", i), "action": "click(1,2)"}
                              for i in range(3)]}
        (root / "tr-9.json").write_text(json.dumps(doc))
        return root, "tr-9"
    if fmt == "clawgui":
        ep = root / "ep7"
        ep.mkdir(parents=True, exist_ok=True)
        doc = {"meta_data": {"task_goal": "Send hi to Bob", "episode_id": "ep-7"},
               "episode": [{"image_path": shot(f"ep7/images/{i}.png", i) if shots else
                            shot(f"ep7/images/{i}.png", i)[len("ep7/"):], "model_response": "tap(3)"}
                           for i in range(3)]}
        (ep / "episode.json").write_text(json.dumps(doc))
        return root, "ep-7"
    raise AssertionError(fmt)


# ------------------------------------------------------------------ 1. containment and extra roots
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


# ------------------------------------------------------------------ 2. nothing loaded is an error
def test_empty_file_is_an_error(tmp_path):
    for name, text in (("empty.jsonl", ""), ("blank.jsonl", "\n  \n\n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(DataError, match="no trajector") as err:
            load_trajectories(tmp_path / name)
        assert name in str(err.value) and "JSON" in str(err.value)


def test_empty_folder_is_an_error(tmp_path):
    with pytest.raises(DataError, match="could not detect") as err:
        load_trajectories(tmp_path)
    assert "record.jsonl" in str(err.value) and "episode.json" in str(err.value)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_folder_with_nothing_of_the_named_format_is_an_error(fmt, tmp_path):
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    (tmp_path / "readme.txt").write_text("hi")
    with pytest.raises(DataError, match="no trajector") as err:
        load_trajectories(tmp_path, fmt=fmt)
    assert str(tmp_path) in str(err.value) and fmt in str(err.value)


@pytest.mark.parametrize("fmt,name", [("androidgen", "555/record.jsonl"), ("zerogui", "app/ex1/traj.jsonl"),
                                      ("clawgui", "ep7/episode.json")])
def test_a_formats_own_file_is_read_as_its_folder(fmt, name, tmp_path):
    root, tid = make_dataset(fmt, tmp_path / "data")
    file = root / name
    assert detect_format(file) == fmt
    folder = load_trajectories(file.parent)
    alone = load_trajectories(file)
    assert not alone.errors and len(alone.trajectories) == 1
    assert alone.trajectories == folder.trajectories
    assert load_trajectories(file, fmt=fmt).trajectories == folder.trajectories
    assert alone.trajectories[0].steps == load_trajectories(root).trajectories[0].steps


def _verdict_lines(path: Path, ids):
    write_jsonl(path, [Verdict(id=i, score=1, status="ok", category="general").to_dict() for i in ids])


def test_a_verdict_file_is_not_data(tmp_path):
    _verdict_lines(tmp_path / "verdicts.jsonl", ["a", "b"])
    with pytest.raises(DataError, match="looks like a verdict file"):
        load_trajectories(tmp_path / "verdicts.jsonl")
    with pytest.raises(DataError, match="looks like a verdict file"):
        load_trajectories(tmp_path / "verdicts.jsonl", fmt="canonical")


def test_verdicts_beside_the_data_are_skipped_with_a_warning(tmp_path):
    path, tid = make_dataset("canonical", tmp_path)
    _verdict_lines(tmp_path / "verdicts.jsonl", [tid])
    res = load_trajectories(tmp_path)
    assert [t.id for t in res.trajectories] == [tid] and not res.errors
    assert any("verdicts.jsonl" in w and "verdict file" in w for w in res.warnings)


def test_the_demo_output_folder_gives_a_clear_error(tmp_path):
    demo = tmp_path / "demo"
    data, tid = make_dataset("canonical", demo / "synth")
    _verdict_lines(demo / "verdicts.jsonl", [tid])
    (demo / "verdicts.config.json").write_text('{"router": "rules"}')
    (demo / "summary.json").write_text('{"n": 1}')
    (demo / "tiny-qwen3-vl").mkdir()
    (demo / "tiny-qwen3-vl" / "config.json").write_text('{"model_type": "qwen3_vl"}')
    with pytest.raises(DataError) as err:
        load_trajectories(demo)
    msg = str(err.value)
    assert "verdicts.jsonl" in msg and "verdict file" in msg and str(data) in msg
    assert [t.id for t in load_trajectories(data).trajectories] == [tid]  # the suggested path loads


# ------------------------------------------------------------------ 3. bad records keep their ids
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_bad_record_keeps_its_own_id(fmt, tmp_path):
    path, tid = make_dataset(fmt, tmp_path / "data", missing=True)
    res = load_trajectories(path)
    assert not res.trajectories and len(res.errors) == 1
    err = res.errors[0]
    assert err.record_id == tid and "image not found" in str(err)
    assert str(err).startswith(str(tmp_path))  # the location stays in the message


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


def test_data_error_survives_pickling():
    import pickle

    e = DataError("f.jsonl", "image not found", "line 3", "steps[0].screenshot", record_id="abc")
    e2 = pickle.loads(pickle.dumps(e))
    assert (str(e2), e2.record_id, e2.field, e2.record, e2.file) == (str(e), "abc", e.field, e.record, e.file)


# ------------------------------------------------------------------ 4. canonical writer
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
