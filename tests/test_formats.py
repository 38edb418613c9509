"""Loading and format detection (formats/__init__.py): every decision of `detect_format`, the format
and path arguments of `load_trajectories`, "nothing loaded" as an error that says what was looked for,
a format's own file read as its folder, verdict files skipped or refused, and bad records keeping
their own ids in every format."""
import json
from pathlib import Path

import pytest

from adaptrubric_local import DataError, Verdict, detect_format, load_trajectories
from adaptrubric_local.formats import canonical

from conftest import FORMATS, canonical_record, make_dataset, make_png, write_jsonl


def _msg(exc_info, root):
    return str(exc_info.value).replace(str(root), "{d}")


LOOKED_FOR = ("*/record.jsonl or episodes/*/record.jsonl (AndroidGen), cleaned/**/*.json (AgentRewardBench), "
              "<task_id>/result.json (Online-Mind2Web), traj.jsonl + config.json (ZeroGUI), traj.jsonl (OSWorld), "
              "*.pkl.gz (AndroidWorld), results/*.jsonl with goal and trajectory (OSReward AndroidWorld), "
              "episode.json with meta_data (ClawGUI-RL), episode.json with task_name (ClawGUI phone agent), "
              "*.jsonl (canonical), trace JSON or Parquet (OSReward), save_to_disk or *.parquet (datasets)")


def test_format_path_and_image_root_errors(tmp_path):
    make_png(tmp_path / "a.png", 1)
    with pytest.raises(ValueError) as ei:
        load_trajectories(tmp_path / "x.jsonl", fmt="csv")
    assert str(ei.value) == ("unknown format 'csv'; choose one of canonical, androidgen, zerogui, osworld, "
                             "androidworld, osreward-androidworld, clawgui, clawgui-agent, osreward, hf-dataset, "
                             "agentrewardbench, online-mind2web or auto")
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
                                     {"id": "c", "instruction": "x",
                                      "steps": [{"screenshot": str(tmp_path / "a.png")}]}])
    res = load_trajectories(folder, check_images=False)  # missing images are not checked, escaping ones are
    assert [t.id for t in res.trajectories] == ["b"] and [e.record_id for e in res.errors] == ["c"]
    res = load_trajectories(folder, image_roots=[tmp_path])
    assert [t.id for t in res.trajectories] == ["c"] and [e.record_id for e in res.errors] == ["b"]


def test_empty_data_messages(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError) as ei:
        load_trajectories(tmp_path / "empty")
    assert _msg(ei, tmp_path) == (
        "{d}/empty: could not detect the format: looked for " + LOOKED_FOR + "; nearest match: none (no file here "
        "has a name or ending any of them looks for)")
    with pytest.raises(DataError) as ei:
        load_trajectories(tmp_path / "empty", fmt="zerogui")
    assert _msg(ei, tmp_path) == ("{d}/empty: no trajectories found: the zerogui loader looked for traj.jsonl "
                                  "with config.json beside it (ZeroGUI task folders) anywhere below")
    (tmp_path / "e.jsonl").write_text("")
    with pytest.raises(DataError) as ei:
        load_trajectories(tmp_path / "e.jsonl")
    assert _msg(ei, tmp_path) == ('{d}/e.jsonl: no trajectories found: the canonical loader looked for one JSON '
                                  'trajectory per line ({"id", "instruction", "steps": [...]}) in *.jsonl')


@pytest.mark.parametrize("name, text, fmt", [
    ("episode.json", '{"meta_data": {}, "episode": []}', "clawgui"),
    ("episode.json", '{"task_name": "t", "episode": []}', "clawgui-agent"), ("record.jsonl", "{}", "androidgen"),
    ("traj.jsonl", "{}", "osworld"), ("x.jsonl", "{}", "canonical"), ("x.json", "{}", "osreward"),
    ("r.jsonl", '{"goal": "g", "trajectory": []}', "osreward-androidworld"), ("Task_0.pkl.gz", "{}", "androidworld")])
def test_detect_format_of_a_file(tmp_path, name, text, fmt):
    (tmp_path / name).write_text(text)
    assert detect_format(tmp_path / name) == fmt


def test_detect_format_of_folders(tmp_path):
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(DataError) as ei:
        detect_format(tmp_path / "x.txt")
    assert _msg(ei, tmp_path) == ("{d}/x.txt: unknown file type: looked for " + LOOKED_FOR + "; nearest match: "
                                  "none (no file here has a name or ending any of them looks for)")

    def folder(name, files):
        d = tmp_path / name
        for rel, text in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
        return d

    assert detect_format(folder("ag1", {"record.jsonl": ""})) == "androidgen"
    assert detect_format(folder("ag2", {"555/record.jsonl": ""})) == "androidgen"
    assert detect_format(folder("ow1", {"traj.jsonl": ""})) == "osworld"
    assert detect_format(folder("ow2", {"app/ex/deep/traj.jsonl": ""})) == "osworld"
    assert detect_format(folder("zg1", {"traj.jsonl": "", "config.json": "{}"})) == "zerogui"
    assert detect_format(folder("zg2", {"app/ex/deep/traj.jsonl": '{"output_text": "Action: wait()"}'})) == "zerogui"
    assert detect_format(folder("aw", {"run_1/T_0.pkl.gz": ""}) / "run_1") == "androidworld"
    assert detect_format(folder("cg", {"ep/sub/episode.json": '{"meta_data": {}, "episode": []}'})) == "clawgui"
    assert detect_format(folder("cga", {"ep/episode.json": '{"task_name": "t", "episode": []}'})) == "clawgui-agent"
    assert detect_format(folder("ag3", {"episodes/555/record.jsonl": "", "database.json": "{}"})) == "androidgen"
    assert detect_format(folder("awj", {"results/r.jsonl": '{"goal": "g", "trajectory": []}'})) == \
        "osreward-androidworld"
    assert detect_format(folder("cn", {"data.jsonl": ""})) == "canonical"
    assert detect_format(folder("os1", {"a/t.json": '{"trace_id": 1, "trajectory": []}'})) == "osreward"
    assert detect_format(folder("os2", {"t.json": '[{"trace_id": 1, "trajectory": []}]',
                                        "bad.json": "{"})) == "osreward"
    many = {f"a{i:02d}.json": "{}" for i in range(20)}  # only the first 20 .json files are opened
    for name, files in {"n0": {**many, "z.json": '{"trace_id": 1, "trajectory": []}'},
                        "n1": {"t.json": "[]"}, "n2": {"t.json": '{"trace_id": 1}'},
                        "n3": {"t.json": '{"trajectory": []}'}, "n4": {"t.json": "{"}}.items():
        with pytest.raises(DataError, match="could not detect the format"):
            detect_format(folder(name, files))


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


def test_unknown_folder_says_what_it_looked_for(tmp_path):
    (tmp_path / "readme.txt").write_text("hi")
    try:
        detect_format(tmp_path)
    except ValueError as exc:
        assert "could not detect" in str(exc) and "record.jsonl" in str(exc)
    else:
        raise AssertionError("expected an error")


# ------------------------------------------------------------------ nothing loaded is an error
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
    root, _tid = make_dataset(fmt, tmp_path / "data")
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
    _path, tid = make_dataset("canonical", tmp_path)
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


# ------------------------------------------------------------------ bad records keep their ids
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_bad_record_keeps_its_own_id(fmt, tmp_path):
    path, tid = make_dataset(fmt, tmp_path / "data", missing=True)
    res = load_trajectories(path)
    assert not res.trajectories and len(res.errors) == 1
    err = res.errors[0]
    assert err.record_id == tid and "image not found" in str(err)
    assert str(err).startswith(str(tmp_path))  # the location stays in the message


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


def test_hint_lists_deeper_data_but_not_other_formats_files(tmp_path):
    folder = tmp_path / "out"
    (folder / "a" / "b").mkdir(parents=True)
    (folder / "a" / "traj.jsonl").write_text("{}\n")
    (folder / "a" / "b" / "deep.jsonl").write_text("{}\n")
    with pytest.raises(DataError) as ei:
        load_trajectories(folder, fmt="canonical")
    looked_for = __import__("adaptrubric_local.formats", fromlist=["FORMATS"]).FORMATS["canonical"].looked_for
    assert str(ei.value) == (f"{folder}: no trajectories found: the canonical loader looked for {looked_for}. "
                             f"Trajectory data may be in: {folder / 'a' / 'b' / 'deep.jsonl'}; pass that path instead")


def test_verdict_file_sorted_first_does_not_hide_the_data(tmp_path):
    from conftest import write_jsonl
    (tmp_path / "a_verdicts.jsonl").write_text(json.dumps({"id": "t0", "status": "ok", "score": 1}) + "\n")
    write_jsonl(tmp_path / "b_data.jsonl", [canonical_record(tmp_path, "t0", 2)])
    res = load_trajectories(tmp_path)
    assert [t.id for t in res.trajectories] == ["t0"]
    assert res.warnings == [f"{tmp_path / 'a_verdicts.jsonl'}: this looks like a verdict file, not trajectory data; "
                            "skipped it"]


def test_one_id_means_one_trajectory_across_the_files_of_a_folder(tmp_path):
    """Verdicts are matched to trajectories by id: a folder of JSONL files is one data set, so an id that a
    second file repeats is an error naming both files (as within one file), and scoring writes the first
    trajectory's verdict and the repeat's error line under its place: the same lines however it is scored,
    with nothing dropped silently."""
    from adaptrubric_local import AdaptRubric, FakeEngine, PipelineConfig
    from adaptrubric_local.scoring import score_file

    data = tmp_path / "data"
    write_jsonl(data / "a.jsonl", [canonical_record(data, "x", 2), canonical_record(data, "y", 2)])
    write_jsonl(data / "b.jsonl", [canonical_record(data, "z", 2),
                                   canonical_record(data, "x", 3, instruction="Other.")])
    loaded = load_trajectories(data)
    assert [t.id for t in loaded.trajectories] == ["x", "y", "z"]
    assert [str(e) for e in loaded.errors] == [
        f"{data / 'b.jsonl'}, record line 2, field 'id': duplicate id 'x' (first in {data / 'a.jsonl'})"]
    out = tmp_path / "v.jsonl"
    score_file(AdaptRubric(FakeEngine(), PipelineConfig(router="rules", fine=False)), data, out, progress=False)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted((v["id"], v["status"]) for v in lines) == [("b.jsonl:line 2", "error"), ("x", "ok"), ("y", "ok"),
                                                             ("z", "ok")]
    assert next(v for v in lines if v["id"] == "x")["n_images"] == 2  # a.jsonl's x, not b.jsonl's
