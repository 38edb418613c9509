"""Scoring to a verdict file (scoring.py): `score_file`'s defaults, resume and retry, the config sidecar,
torn-tail repair, last line per id and the settings that decide verdicts."""
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from adaptrubric_local import FakeEngine, run_settings, scoring
from adaptrubric_local.dry_run import pipeline_script as default_script
from adaptrubric_local.formats.base import DataError
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.run_settings import vars_of
from adaptrubric_local.scoring import score_file
from adaptrubric_local.synth import synthesize
from adaptrubric_local.verdict_file import repair_torn_tail


def test_torn_tail_is_cut_at_the_last_newline(tmp_path):
    p = tmp_path / "v.jsonl"
    for before, after in [(b'{"id": "a"}\n{"id": "b"}\n{"id": "c", "sco', b'{"id": "a"}\n{"id": "b"}\n'),
                          (b'{"id": "a"}\n', b'{"id": "a"}\n'), (b'{"id": "torn', b""),
                          (b'{"id": "a"}\nXX\nXX', b'{"id": "a"}\nXX\n'),  # whatever the torn line holds, it is cut
                          (b"", b""),
                          (b'{"id": "a"}\n' + b"x" * 200_000, b'{"id": "a"}\n')]:  # a torn line longer than a block
        p.write_bytes(before)
        repair_torn_tail(p)
        assert p.read_bytes() == after, before[:40]


def test_the_last_lines_and_the_ids_a_resume_skips(tmp_path):
    from adaptrubric_local.verdict_file import FileState, iter_last_lines

    p = tmp_path / "v.jsonl"
    assert list(iter_last_lines(p)) == []
    p.write_text('{"id": 1, "score": 0}\n\n{"id": "é", "score": 1}\n{"id": "1", "score": 1}\n{"id": "x"')
    assert list(iter_last_lines(p)) == [{"id": "1", "score": 1}, {"id": "é", "score": 1}]  # the torn line cut off
    p.write_text('{"id": "a"}\n\n{"no_id": 1}\n')
    with pytest.raises(ValueError) as ei:
        list(iter_last_lines(p))
    assert str(ei.value) == f"{p}: line 3 is not a verdict line"
    p.write_text('[1]\n')
    with pytest.raises(ValueError, match="line 1 is not"):
        list(iter_last_lines(p))
    p.write_text('{"id": "a", "status": "error"}\n{"id": "b", "status": "ok"}\n')
    state = FileState.scan(p)
    assert [i for i in "ab" if state.done(i, False)] == ["a", "b"] and [i for i in "ab" if state.done(i, True)] == ["b"]

def test_error_id():
    assert scoring.error_id(DataError("/d/data.jsonl", "bad", "line 3", "steps", record_id="t7")) == "t7"
    assert scoring.error_id(DataError("/d/data.jsonl", "bad", "line 3", "steps")) == "data.jsonl:line 3"
    assert scoring.error_id(DataError("/d/data.jsonl", "bad")) == "data.jsonl"

    class Plain:
        file, record = "/d/x.json", None
    assert scoring.error_id(Plain()) == "x.json"


def test_verdict_settings_and_diff():
    meta = {"router": "model", "trajectories_per_batch": 4, "created": "now", "forced_resumes": [1], "data": "d",
            "engine": {"model": "m", "max_batch_size": 8, "dtype": "bf16"}, "fine": True}
    assert run_settings.verdict_settings(meta) == {"router": "model", "engine.model": "m", "engine.dtype": "bf16",
                                              "fine": True}
    assert run_settings.verdict_settings({"engine": None}) == {"engine": None}
    new = {**meta, "router": "rules", "trajectories_per_batch": 1, "engine": {"model": "m2", "max_batch_size": 1},
           "extra": 1}
    del new["fine"]
    assert run_settings.settings_diff(meta, new) == [
        "engine.dtype: 'bf16' -> None", "engine.model: 'm' -> 'm2'", "extra: None -> 1", "fine: True -> None",
        "router: 'model' -> 'rules'"]
    assert run_settings.settings_diff(meta, {**meta, "data": "other", "created": "later"}) == []
    fast = {**meta, "engine": {**meta["engine"], "engine": "vllm", "max_num_seqs": 64, "max_model_len": 4096}}
    slow = {**fast, "engine": {**fast["engine"], "max_num_seqs": 8, "enforce_eager": True, "kv_cache_memory_gb": 2}}
    assert run_settings.settings_diff(fast, slow) == []  # vLLM's scheduling and memory settings change no verdict
    assert run_settings.settings_diff(meta, fast) == ["engine.engine: None -> 'vllm'",
                                                      "engine.max_model_len: None -> 4096"]


def test_check_resume(tmp_path, monkeypatch):
    out = tmp_path / "v.jsonl"
    meta = {"router": "model", "data": "new.jsonl"}
    assert run_settings.check_resume(out, meta, False) is meta
    side = run_settings.sidecar(out, "config")
    assert side == tmp_path / "v.config.json"
    side.write_text(json.dumps({"router": "model", "data": "old.jsonl", "note": None}))
    assert run_settings.check_resume(out, meta, False) == {"router": "model", "data": "new.jsonl", "note": None}
    assert run_settings.check_resume(out, {"router": "model"}, False) == {"router": "model", "data": "old.jsonl",
                                                                      "note": None}
    other = {"router": "rules", "fine": False}
    with pytest.raises(ValueError) as ei:
        run_settings.check_resume(out, other, False)
    assert str(ei.value) == (f"--resume: {out} was begun with other settings (fine: None -> False; router: "
                             "'model' -> 'rules'). Use the original flags, write to a new --out, or pass "
                             "--force-settings to mix them (recorded in v.config.json)")
    kept = run_settings.check_resume(out, other, True)
    assert kept["router"] == "model" and kept["data"] == "old.jsonl"
    (rec,) = kept["forced_resumes"]
    assert set(rec) == {"at", "differences"} and isinstance(rec["at"], str) and len(rec["at"]) == 19
    assert rec["differences"] == ["fine: None -> False", "router: 'model' -> 'rules'"]


def test_the_config_record_names_the_adapter_and_visual_token_cap():
    @dataclass
    class Cfg:
        adapter: str = "runs/adapter"
        max_visual_tokens: int = 256

    class Eng(FakeEngine):
        config = Cfg()

    meta = vars_of(AdaptRubric(Eng(), PipelineConfig(router="rules")))
    assert (meta["adapter"], meta["max_visual_tokens"]) == ("runs/adapter", 256)
    assert meta["engine"] == {"adapter": "runs/adapter", "max_visual_tokens": 256}


def test_run_settings_come_from_the_configs_alone():
    @dataclass
    class Cfg:
        model: str = "m"
        adapter: str = "runs/adapter"
        max_visual_tokens: int = 256
        image_workers: int = 2

        @property
        def name(self) -> str:
            return "m+runs/adapter"

    class Eng(FakeEngine):
        config = Cfg()

    pipe = AdaptRubric(Eng(name="m+runs/adapter"), PipelineConfig(router="rules", fine=False))
    built = run_settings.run_settings(PipelineConfig(router="rules", fine=False, trajectories_per_batch=3),
                                 Cfg(image_workers=9), bank_sha=pipe.bank.sha, prompts_sha=pipe.prompts.sha)
    assert built["model"] == "m+runs/adapter" and built["ablation"] == pipe.config.ablation
    assert set(built) == set(vars_of(pipe)) and run_settings.settings_diff(vars_of(pipe), built) == []  # runtime only
    assert run_settings.run_settings(PipelineConfig(), None, bank_sha="b", prompts_sha="p")["model"] is None
    assert run_settings.run_settings(PipelineConfig(), Cfg(), bank_sha="b", prompts_sha="p", model="x")["model"] == "x"
    # how a run was executed never decides a resume; a resume records how it ran
    a = {**built, "runtime": {"mode": "in-process"}}
    b = {**built, "runtime": {"mode": "ray", "replicas": 4}}
    assert run_settings.settings_diff(a, b) == []


def test_a_resume_records_how_it_ran(tmp_path):
    out = tmp_path / "v.jsonl"
    run_settings.sidecar(out, "config").write_text(json.dumps({"router": "model", "runtime": {"mode": "in-process"}}))
    kept = run_settings.check_resume(out, {"router": "model", "runtime": {"mode": "ray", "replicas": 2}}, False)
    assert kept["runtime"] == {"mode": "ray", "replicas": 2}
    assert run_settings.check_resume(out, {"router": "model"}, False)["runtime"] == {"mode": "in-process"}


def test_score_file_defaults(tmp_path, capsys):


    data = synthesize(tmp_path / "d", n_tasks=1, candidates=2, size=(90, 200))
    out = tmp_path / "v.jsonl"
    eng = FakeEngine()
    score_file(AdaptRubric(eng, PipelineConfig(router="rules")), data, out)
    assert capsys.readouterr().err  # a progress bar by default
    with pytest.raises(ValueError, match="exists; pass --resume"):  # no resume by default
        score_file(AdaptRubric(eng, PipelineConfig(router="rules")), data, out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 2 and all(x.get("status") == "ok" for x in lines)
    with pytest.raises(ValueError, match="other settings"):  # settings must match unless forced
        score_file(AdaptRubric(eng, PipelineConfig(router="rules", fine=False)), data, out, resume=True)
    # an error line is retried on resume by default
    bad = FakeEngine(fail=lambda r: "boom" if r.kind == "verify" else None)
    out2 = tmp_path / "new" / "dir" / "v2.jsonl"  # missing folders are created
    score_file(AdaptRubric(bad, PipelineConfig(router="rules")), data, out2, progress=False)
    score_file(AdaptRubric(FakeEngine(), PipelineConfig(router="rules")), data, out2, resume=True, progress=False)
    last = {}
    for x in out2.read_text().splitlines():
        d = json.loads(x)
        last[d["id"]] = d["status"]
    assert set(last.values()) == {"ok"}


def test_score_file_passes_the_format_and_prints_loader_warnings_to_stderr(tmp_path, capsys):


    data = Path(synthesize(tmp_path / "d", n_tasks=1, candidates=2, size=(90, 200)))
    folder = data if data.is_dir() else data.parent
    pipe = AdaptRubric(FakeEngine(), PipelineConfig(router="rules"))
    # a verdict file left in the data folder is skipped with a warning on stderr, never on stdout
    score_file(pipe, folder, tmp_path / "v.jsonl", fmt="canonical", progress=False)
    shutil.copy(tmp_path / "v.jsonl", folder / "old_verdicts.jsonl")
    capsys.readouterr()
    summary = score_file(pipe, folder, tmp_path / "v2.jsonl", fmt="canonical", progress=False)
    cap = capsys.readouterr()
    assert summary["n"] == 2
    assert f"warning: {folder / 'old_verdicts.jsonl'}: this looks like a verdict file" in cap.err
    assert "warning" not in cap.out
    # the format given is the one used: the zerogui loader finds nothing in canonical data
    with pytest.raises(DataError, match="the zerogui loader looked for"):
        score_file(pipe, folder, tmp_path / "v3.jsonl", fmt="zerogui", progress=False)


def test_score_file_config_sidecar_names_the_data_and_is_indented(tmp_path):


    class WithStats(FakeEngine):
        @property
        def stats(self):  # what the transformers engine reports about its batches
            return {"batches": 1, "rows": 2}

    data = synthesize(tmp_path / "d", n_tasks=1, candidates=1, size=(90, 200))
    out = tmp_path / "v.jsonl"
    pipe = AdaptRubric(WithStats(), PipelineConfig(router="rules", fine=False))
    summary = score_file(pipe, data, out, progress=False, extra={"note": "x"})
    text = (tmp_path / "v.config.json").read_text()
    meta = json.loads(text)
    assert meta["data"] == str(data) and meta["note"] == "x" and meta["router"] == "rules"
    assert text == json.dumps(meta, indent=2) + "\n"  # a file people read: one key per line
    assert (summary["bank_sha"], summary["ablation"], summary["out"]) == (pipe.bank.sha, "no_fine", str(out))
    assert summary["engine"] == {"batches": 1, "rows": 2}
    assert (tmp_path / "v.summary.json").read_text() == json.dumps(summary, indent=2) + "\n"


def test_score_file_resume_counts_retried_error_lines(tmp_path, capsys):


    data = synthesize(tmp_path / "d", n_tasks=1, candidates=3, size=(90, 200))
    with open(data, "a") as fh:  # a record whose screenshot is missing: a data error line
        fh.write(json.dumps({"id": "bad", "instruction": "x", "steps": [{"screenshot": "nope.png"}]}) + "\n")
    out = tmp_path / "v.jsonl"
    failing = FakeEngine(fail=lambda r: "boom" if r.kind == "verify" and r.tag in ("t000_c0", "t000_c1") else None)
    first = score_file(AdaptRubric(failing, PipelineConfig(router="rules")), data, out, progress=False)
    assert (first["skipped_resume"], first["retried_errors"]) == (0, 0)
    capsys.readouterr()
    summary = score_file(AdaptRubric(FakeEngine(), PipelineConfig(router="rules")), data, out, resume=True,
                         progress=False)
    # t000_c2 is done; the two engine errors and the still-bad record are tried again
    assert (summary["skipped_resume"], summary["retried_errors"]) == (1, 3)
    assert capsys.readouterr().err.splitlines()[0] == (
        f"resuming: 1 id(s) already in {out}, 3 to do (3 error line(s) retried)")
    # nothing retried: the message has no retry part
    again = score_file(AdaptRubric(FakeEngine(), PipelineConfig(router="rules")), data, out, resume=True,
                       progress=False, retry_errors=False)
    assert again["retried_errors"] == 0
    assert capsys.readouterr().err.splitlines()[0] == f"resuming: 4 id(s) already in {out}, 0 to do"


def test_score_file_records_the_engines_name(tmp_path):
    """Every engine is an Engine (engine/base.py) and has a name; the verdicts and summary carry it."""
    data = synthesize(tmp_path / "d", n_tasks=1, candidates=1, size=(90, 200))
    out = tmp_path / "v.jsonl"
    summary = score_file(AdaptRubric(FakeEngine(name="judge-x"), PipelineConfig(router="rules")), data, out,
                         progress=False)
    assert summary["n"] == 1 and summary["model"] == "judge-x"
    assert json.loads(out.read_text().splitlines()[0])["model"] == "judge-x"


def test_score_file_progress_bar_names_its_unit_and_counts(tmp_path, capsys):
    data = synthesize(tmp_path / "d", n_tasks=1, candidates=3, size=(90, 200))
    eng = FakeEngine(fail=lambda r: "boom" if r.kind == "verify" and r.tag == "t000_c1" else None,
                     script=lambda r: "no verdict here" if r.kind == "verify" and r.tag != "t000_c0"
                     else default_script(r))
    score_file(AdaptRubric(eng, PipelineConfig(router="rules")), data, tmp_path / "v.jsonl")
    cap = capsys.readouterr()
    bar = cap.err.replace("\r", "\n").splitlines()
    # the bar names the stage that runs; tqdm pads a redraw with spaces
    final = [ln for ln in bar if ln.startswith("scoring (verifying trajectories 1-3 of 3): 100%")][-1].rstrip()
    # one ok, one engine error, one unparseable output
    assert "3/3" in final and "traj/s" in final and final.endswith("errors=1, unparsed=1]")
    assert cap.out == ""
    score_file(AdaptRubric(FakeEngine(), PipelineConfig(router="rules")), data, tmp_path / "v2.jsonl",
               progress=False)
    assert capsys.readouterr().err == ""  # progress=False: no bar


def test_score_file_error_lines_and_summary_fields(tmp_path, ascii_locale):


    data = synthesize(tmp_path / "d", n_tasks=1, candidates=2, size=(90, 200))
    with open(data, "a", encoding="utf-8") as fh:  # a bad record with a non-ASCII id (C locale: UTF-8 anyway)
        fh.write(json.dumps({"id": "bäd", "instruction": "x", "steps": [{"screenshot": "nope.png"}]}) + "\n")
    out = tmp_path / "v.jsonl"
    failing = FakeEngine(name="judge", fail=lambda r: "boom" if r.kind == "verify" and r.tag == "t000_c0" else None)
    pipe = AdaptRubric(failing, PipelineConfig())
    pipe.route_many(["an instruction routed before this file"])  # earlier unparsed counts are not this file's
    pipe.criteria.unparsed["route"] = 5
    summary = score_file(pipe, data, out, progress=False)
    lines = {d["id"]: d for d in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert set(lines) == {"bäd", "t000_c0", "t000_c1"}
    for i in ("bäd", "t000_c0"):
        assert (lines[i]["status"], lines[i]["bank_sha"], lines[i]["model"]) == ("error", pipe.bank.sha, "judge")
    assert summary["model"] == "judge" and summary["route_unparsed"] == 0
    assert 0 < summary["s_per_traj"] < 60
    # resuming with the same failure writes no second, identical error line for either id
    size = out.stat().st_size
    score_file(AdaptRubric(failing, PipelineConfig()), data, out, resume=True, progress=False)
    assert out.stat().st_size == size


def test_the_file_summary_counts_what_earlier_runs_hit():
    """A resumed file's summary counts the earlier lines' cap and context cuts too (both flags kept)."""
    from adaptrubric_local.scoring import _whole
    from adaptrubric_local.types import Verdict
    from adaptrubric_local.verdict_file import Tally

    whole_tally, run_tally = Tally(), Tally()
    for d in ({"id": "a", "status": "unparsed", "hit_cap": True, "hit_context": True},
              {"id": "b", "status": "ok", "score": 1, "hit_context": True}):
        whole_tally.add(d)
    for v in [Verdict(id="c", status="ok", score=0)]:
        whole_tally.add(v)
        run_tally.add(v)
    run = run_tally.summary({}, 1.0)
    whole = _whole(whole_tally, run, None)
    assert (whole["n"], whole["hit_cap"], whole["hit_context"]) == (3, 1, 2)
    assert (run["hit_cap"], run["hit_context"]) == (0, 0)


def test_planned_settings_are_the_loaded_engines(tiny_engine, tiny_model):
    """The settings record `--resume` is checked against before the model loads (from the configs) is the
    one the transformers engine gives once loaded, so the early check refuses exactly what the file's
    record refuses."""
    cfg = PipelineConfig(router="rules", fine=False, max_images=3)
    planned = run_settings.planned_settings(cfg, {"model": str(tiny_model), "max_new_tokens": 12, "max_batch_size": 8})
    loaded = {**vars_of(AdaptRubric(tiny_engine, cfg)), "runtime": dict(run_settings.IN_PROCESS)}
    assert planned == loaded
    other = run_settings.planned_settings(cfg, {"model": str(tiny_model), "max_new_tokens": 12,
                                                "max_visual_tokens": 64})
    assert run_settings.settings_diff(loaded, other) == ["engine.max_visual_tokens: None -> 64",
                                                    "max_visual_tokens: None -> 64"]


def test_the_progress_bar_names_the_batch_among_the_whole_runs_trajectories(tmp_path, capsys):
    """10 records, one bad, in batches of 8: the stage names trajectories 1-8, then 9, of the run's 10 records
    (the bar's total: the data is streamed, so a bad record is known when it is read, and the bar counts its
    error line too), not "verifying 8 trajectory(ies)" beside 0/10."""
    data = synthesize(tmp_path / "d", n_tasks=5, candidates=2, size=(90, 200))
    lines = (tmp_path / "d" / "trajectories.jsonl").read_text().splitlines()
    bad = json.loads(lines[1])
    bad["instruction"] = ""
    lines[1] = json.dumps(bad)
    (tmp_path / "d" / "trajectories.jsonl").write_text("\n".join(lines) + "\n")
    pipe = AdaptRubric(FakeEngine(), PipelineConfig(router="model", trajectories_per_batch=8))
    score_file(pipe, data, tmp_path / "v.jsonl")
    bar = [ln.rstrip() for ln in capsys.readouterr().err.replace("\r", "\n").splitlines() if ln.startswith("scoring")]
    stages = list(dict.fromkeys(ln.split(":")[0] for ln in bar))
    assert any(x.startswith("scoring (routing ") and x.endswith(" instruction(s) for trajectories 1-8 of 10)")
               for x in stages), stages
    assert any(x.startswith("scoring (verifying trajectories 1-8 of 10)") for x in stages), stages
    assert "scoring (verifying trajectory 9 of 10)" in stages, stages
    assert all("/10" in ln.split("|")[-1] for ln in bar if "|" in ln)
    assert pipe._span is None
