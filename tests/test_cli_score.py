"""`adaptrubric score` and `prompt` as a user runs them (cli_score.py), with the scripted engine in place
of the model: the paper's defaults, resume safety, error retry, record ids, image roots, cost
accounting that agrees with `eval`, and clean failures."""
import json
from pathlib import Path

import pytest

from adaptrubric_local import FakeEngine
from adaptrubric_local.cli import main
from adaptrubric_local.engine import build
from adaptrubric_local.evaluation.harness import load_verdicts

from conftest import canonical_record, make_png, write_jsonl


@pytest.fixture
def fake(monkeypatch):
    """Every command's engine is one recording FakeEngine (the CLI builds it through engine.build)."""
    eng = FakeEngine(name="fake-model")
    eng.close = lambda: None
    built = []

    def fake_build(**kw):
        built.append(kw)
        return eng

    monkeypatch.setattr(build, "build_engine", fake_build)
    eng.built = built
    return eng


@pytest.fixture
def data(tmp_path):
    recs = []
    for task, ins in enumerate(["Turn on Bluetooth.", "Delete the note Foo."]):
        for k in range(3):
            recs.append(canonical_record(tmp_path, f"r{task}{k}", 3 + k, instruction=ins, task_id=f"t{task}",
                                         label=k % 2))
    return write_jsonl(tmp_path / "d.jsonl", recs)


def test_score_defaults_are_the_papers(fake, data, tmp_path):
    out = tmp_path / "v.jsonl"
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet"]) == 0
    kinds = [b[0].kind for b in fake.batches]
    assert kinds == ["route", "cue", "verify"]  # the model router (H.2) and cue writer (H.3) run by default
    verify = fake.batches[-1]
    assert all(r.max_new_tokens == 1024 and r.stop_after_line == "MISSING_EVIDENCE:" for r in verify)
    assert fake.built[0]["max_visual_tokens"] is None and fake.built[0]["max_new_tokens"] == 1024
    cfg = json.loads((tmp_path / "v.config.json").read_text())
    assert cfg["router"] == "model" and cfg["dedupe_frames"] is False and cfg["cue_filter"] is False
    summary = json.loads((tmp_path / "v.summary.json").read_text())
    assert summary["calls_per_traj"] == pytest.approx(1 + 2 * 2 / 6)  # 2 distinct instructions, 6 trajectories


def test_prompt_shows_exactly_what_score_sends(fake, data, tmp_path, capsys):
    flags = ["--model", "m", "--max-images", "3", "--no-coarse"]
    assert main(["score", str(data), "--out", str(tmp_path / "v.jsonl"), "--quiet", *flags]) == 0
    sent = {r.tag: r for r in fake.batches[-1]}
    capsys.readouterr()
    assert main(["prompt", str(data), "--id", "r12", "--json", *flags]) == 0
    shown = json.loads(capsys.readouterr().out)
    req = sent["r12"]
    assert (shown["prompt"], shown["suffix"], shown["images"]) == (req.prompt, req.suffix, req.images)
    assert shown["ablation"] == "no_coarse" and len(shown["images"]) == 3


def _fake_outputs(fake):
    return [fake._one(r) for batch in fake.batches for r in batch]


def test_score_and_eval_agree_on_costs(fake, data, tmp_path, capsys):
    out = tmp_path / "v.jsonl"
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet"]) == 0
    summary = json.loads((tmp_path / "v.summary.json").read_text())
    total = sum(o.prompt_tokens + o.completion_tokens for o in _fake_outputs(fake))
    assert summary["tokens_per_traj"] == pytest.approx(total / 6)  # every call: router, cues and verifier
    assert main(["eval", str(data), "--verdicts", str(out), "--out", str(tmp_path / "e")]) == 0
    eff = json.loads((tmp_path / "e" / "metrics.json").read_text())["efficiency"]
    assert eff["tokens_per_traj"] == pytest.approx(summary["tokens_per_traj"])
    assert eff["calls_per_traj"] == pytest.approx(summary["calls_per_traj"])


def test_resume_refuses_other_settings_unless_forced(fake, data, tmp_path, capsys):
    out = tmp_path / "v.jsonl"
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet"]) == 0
    lines = out.read_text()
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--resume", "--no-fine"]) == 2
    err = capsys.readouterr().err
    assert "begun with other settings" in err and "fine: True -> False" in err
    assert out.read_text() == lines  # nothing written, sidecar untouched
    assert json.loads((tmp_path / "v.config.json").read_text())["fine"] is True
    # same settings (a runtime-only flag differs): resumes, nothing left to do
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--resume",
                 "--max-batch-size", "2"]) == 0
    assert out.read_text() == lines
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--resume", "--no-fine",
                 "--force-settings"]) == 0
    cfg = json.loads((tmp_path / "v.config.json").read_text())
    assert cfg["fine"] is True and cfg["forced_resumes"][0]["differences"] == ["ablation: 'full' -> 'no_fine'",
                                                                              "fine: True -> False"]


def _lines(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def test_bad_record_keeps_its_id_and_is_retried_after_the_fix(fake, tmp_path):
    recs = [canonical_record(tmp_path, f"r{i}", 3) for i in range(3)]
    recs[1]["steps"][1]["screenshot"] = "img/missing.png"
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    out = tmp_path / "v.jsonl"
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet"]) == 0
    rows = {r["id"]: r for r in _lines(out)}
    assert set(rows) == {"r0", "r1", "r2"} and rows["r1"]["status"] == "error"
    assert "missing.png" in rows["r1"]["error"] and "d.jsonl" in rows["r1"]["error"]
    # resuming without a fix writes no second copy of the same error
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--resume"]) == 0
    assert len(_lines(out)) == 3
    make_png(tmp_path / "img" / "missing.png", seed=7)
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--resume"]) == 0
    assert [r["id"] for r in _lines(out)] == ["r1", "r0", "r2", "r1"]
    final = {v.id: v.status for v in load_verdicts(out)}
    assert final == {"r0": "ok", "r1": "ok", "r2": "ok"}
    # --no-retry-errors leaves error lines alone
    recs[2]["steps"][0]["screenshot"] = "img/gone.png"
    write_jsonl(tmp_path / "d2.jsonl", recs)
    out2 = tmp_path / "v2.jsonl"
    assert main(["score", str(tmp_path / "d2.jsonl"), "--model", "m", "--out", str(out2), "--quiet"]) == 0
    make_png(tmp_path / "img" / "gone.png", seed=8)
    n = len(_lines(out2))
    assert main(["score", str(tmp_path / "d2.jsonl"), "--model", "m", "--out", str(out2), "--quiet", "--resume",
                 "--no-retry-errors"]) == 0
    assert len(_lines(out2)) == n


def test_image_root_allows_absolute_paths_elsewhere(fake, tmp_path):
    shots = tmp_path / "shots"
    rec = {"id": "a1", "instruction": "Turn on Wi-Fi.",
           "steps": [{"screenshot": make_png(shots / f"{i}.png", seed=i), "action": "tap"} for i in range(3)]}
    data = write_jsonl(tmp_path / "data" / "d.jsonl", [rec])
    out = tmp_path / "v.jsonl"
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet"]) == 0
    row = _lines(out)[0]
    assert row["id"] == "a1" and row["status"] == "error" and "--image-root" in row["error"]
    out.unlink()
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--image-root", str(shots)]) == 0
    assert _lines(out)[0]["status"] == "ok"


def test_nothing_to_score_is_an_error(fake, tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["score", str(empty), "--model", "m", "--out", str(tmp_path / "v.jsonl")]) == 2
    assert "empty.jsonl" in capsys.readouterr().err
    assert not fake.batches


def test_the_summary_after_resume_describes_the_whole_file(fake, data, tmp_path, capsys):
    first_two = write_jsonl(tmp_path / "part.jsonl", Path(data).read_text().splitlines()[:2])
    out = tmp_path / "v.jsonl"
    assert main(["score", str(first_two), "--model", "m", "--out", str(out), "--quiet"]) == 0  # a run cut short
    capsys.readouterr()
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--resume"]) == 0
    printed = json.loads(capsys.readouterr().out)  # without --quiet: the summary JSON
    saved = json.loads((tmp_path / "v.summary.json").read_text())
    assert saved == printed and (saved["n"], saved["scored"], saved["this_run"]["n"]) == (6, 6, 4)
    # every line's calls: the first instruction was routed and cued once in each run (4 + 3 + 5 calls)
    assert saved["skipped_resume"] == 2 and saved["calls_per_traj"] == pytest.approx(12 / 6)
    # nothing left to do: the file still holds 6 verdicts, and this run none
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--resume"]) == 0
    again = json.loads((tmp_path / "v.summary.json").read_text())
    assert (again["n"], again["scored"], again["this_run"]["n"], again["this_run"]["scored"]) == (6, 6, 0, 0)
    # seconds add up over the runs (this one's too, however short), divided by the 6 answered verdicts
    assert again["timed_trajectories"] == 6 and again["seconds"] >= saved["seconds"]
    assert again["seconds"] == pytest.approx(saved["seconds"] + again["this_run"]["seconds"])
    assert again["s_per_traj"] == pytest.approx(again["seconds"] / 6)


def test_score_says_why_each_bad_record_failed_and_counts_them_by_kind(fake, tmp_path, capsys):
    recs = [canonical_record(tmp_path, f"r{i}", 3) for i in range(4)]
    recs[1]["steps"][2]["screenshot"] = "img/gone.png"  # a missing screenshot
    recs[2]["steps"] = []  # an empty trajectory
    lines = [json.dumps(r) for r in recs] + [json.dumps(recs[0]).replace('"r0"', '"r9"')[:40]]  # a truncated line
    data = write_jsonl(tmp_path / "d.jsonl", lines)
    fake.fail = lambda r: "the server closed the connection" if r.tag == "r3" and r.kind == "verify" else None
    assert main(["score", str(data), "--model", "m", "--out", str(tmp_path / "v.jsonl"), "--quiet"]) == 0
    err = capsys.readouterr().err.splitlines()
    said = [x for x in err if x.startswith("error: ")]
    assert len(said) == 4  # each bad record once, with file, record and field
    assert any("d.jsonl, record line 2 (id r1), field 'steps[2].screenshot': image not found" in x for x in said), said
    assert any("d.jsonl, record line 3 (id r2), field 'steps': trajectory has no steps" in x for x in said), said
    assert any("d.jsonl, record line 5 (id r9): malformed JSON" in x for x in said), said  # the id it names first
    assert any("record r3: the server closed the connection" in x for x in said), said
    closing = next(x for x in err if "record(s) failed in this run" in x)
    assert closing.startswith("4 record(s) failed in this run: ")
    for kind in ("1 image not found", "1 trajectory has no steps", "1 malformed JSON",
                 "1 the server closed the connection"):
        assert kind in closing
    summary = json.loads((tmp_path / "v.summary.json").read_text())
    assert summary["errors"] == 4 and sum(summary["this_run"]["errors_by_kind"].values()) == 4


def test_progress_moves_as_verdicts_are_ready_and_names_the_stage(fake, data, tmp_path, capsys):
    """An engine that hands its outputs over one at a time (as the transformers engine does per length
    group): each verdict is written, and the bar redrawn, before the next one is generated."""
    out = tmp_path / "v.jsonl"
    lines_before = []

    def one_at_a_time(requests):
        for i, r in enumerate(requests):
            lines_before.append(out.read_text().count("\n") if out.exists() else 0)
            yield [(i, fake._one(r))]

    fake.generate_iter = one_at_a_time
    assert main(["score", str(data), "--model", "m", "--out", str(out)]) == 0
    assert lines_before == [0, 1, 2, 3, 4, 5]
    bar = [x.rstrip() for x in capsys.readouterr().err.replace("\r", "\n").splitlines() if x.startswith("scoring")]
    assert any(x.startswith("scoring (routing 2 instruction(s) for trajectories 1-6 of 6)") for x in bar)
    assert any(x.startswith("scoring (cues for 2 instruction(s) for trajectories 1-6 of 6)") for x in bar)
    shown = [x.split("|")[2].split()[0] for x in bar if x.startswith("scoring (verifying trajectories 1-6 of 6)")]
    assert list(dict.fromkeys(shown)) == [f"{k}/6" for k in range(7)]  # every step drawn, as it happened


def test_a_cut_line_mended_is_scored_on_resume_and_eval_reads_the_file(fake, tmp_path, capsys):
    """A line cut short by a killed writer: its error line is under the id it names first (r9), so --resume
    scores it once the line is mended, and eval over the mended data counts it. A cut line whose id cannot
    be read is an error under its place (d.jsonl:line 4); once mended, that line names no record of the
    data: eval leaves it out with a note instead of refusing the file as another data set's."""
    recs = [canonical_record(tmp_path, f"r{i}", 2, label=1) for i in range(4)]
    recs[3] = {"instruction": recs[3]["instruction"], **recs[3]}  # its id is not the first key
    whole = [json.dumps(r) for r in recs] + [json.dumps(recs[0]).replace('"r0"', '"r9"')]
    data = write_jsonl(tmp_path / "d.jsonl", [*whole[:3], whole[3][:30], whole[4][:40]])
    out = tmp_path / "v.jsonl"
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet"]) == 0
    assert {v.id: v.status for v in load_verdicts(out)} == {"r0": "ok", "r1": "ok", "r2": "ok", "r9": "error",
                                                            "d.jsonl:line 4": "error"}
    write_jsonl(data, whole)  # mended
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--resume"]) == 0
    capsys.readouterr()
    assert main(["eval", str(data), "--verdicts", str(out), "--out", str(tmp_path / "e"), "--quiet",
                 "--no-review"]) == 0
    err = capsys.readouterr().err
    m = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert m["overall"]["n"] == 5 and m["overall"]["errors"] == 0 and m["coverage"]["missing"] == []
    assert m["coverage"]["stale_errors"] == ["d.jsonl:line 4"] and m["coverage"]["extra"] == []
    assert "note: 1 error line(s) in" in err and "mended or removed since" in err


def test_cost_figures_count_only_the_trajectories_scored(fake, tmp_path, capsys):
    """4 records scored and 5 that do not load: calls and seconds per trajectory are over the 4 (one
    verifier call each with --router rules --no-fine), the 5 error lines counted apart, in `score`'s
    summary and in `eval`'s efficiency."""
    recs = [canonical_record(tmp_path, f"r{i}", 3, label=i % 2) for i in range(9)]
    for i in range(4, 9):
        recs[i]["steps"][0]["screenshot"] = f"img/gone{i}.png"
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    out = tmp_path / "v.jsonl"
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--router", "rules",
                 "--no-fine"]) == 0
    s = json.loads((tmp_path / "v.summary.json").read_text())
    assert (s["n"], s["scored"], s["errors"], s["timed_trajectories"]) == (9, 4, 5, 4)
    assert s["calls_per_traj"] == pytest.approx(1.0) and s["this_run"]["calls_per_traj"] == pytest.approx(1.0)
    assert s["s_per_traj"] == pytest.approx(s["seconds"] / 4)
    tokens = sum(o.prompt_tokens + o.completion_tokens for o in _fake_outputs(fake))
    assert s["tokens_per_traj"] == pytest.approx(tokens / 4)
    capsys.readouterr()
    assert main(["eval", str(data), "--verdicts", str(out), "--out", str(tmp_path / "e"), "--quiet",
                 "--no-review"]) == 0
    assert "calls/traj=1.00" in capsys.readouterr().out
    eff = json.loads((tmp_path / "e" / "metrics.json").read_text())["efficiency"]
    assert (eff["trajectories"], eff["errors"], eff["calls_per_traj"]) == (4, 5, pytest.approx(1.0))
    assert eff["s_per_traj"] == pytest.approx(s["s_per_traj"])
    assert "5 error line(s) counted apart" in (tmp_path / "e" / "report.md").read_text()


def test_resume_refuses_other_settings_before_the_engine_is_built(fake, data, tmp_path, capsys):
    """A vLLM file begun at --max-model-len 960: --resume at 2048 is refused before any engine is built
    (vLLM's start-up took 41 s before the refusal), and so is a second run into a file that holds lines."""
    import time

    out = tmp_path / "v.jsonl"
    flags = ["--model", "m", "--out", str(out), "--quiet", "--engine", "vllm"]
    assert main(["score", str(data), *flags, "--max-model-len", "960"]) == 0
    assert len(fake.built) == 1
    capsys.readouterr()
    t0 = time.perf_counter()
    assert main(["score", str(data), *flags, "--max-model-len", "2048", "--resume"]) == 2
    assert time.perf_counter() - t0 < 5
    err = capsys.readouterr().err
    assert "engine.max_model_len: 960 -> 2048" in err and "--force-settings" in err
    assert len(fake.built) == 1  # the engine builder was never called
    assert main(["score", str(data), *flags, "--max-model-len", "960"]) == 2  # no --resume
    assert "exists; pass --resume" in capsys.readouterr().err and len(fake.built) == 1
    # the same settings resume (the engine built, nothing left to do); --force-settings mixes them
    assert main(["score", str(data), *flags, "--max-model-len", "960", "--resume"]) == 0
    assert main(["score", str(data), *flags, "--max-model-len", "2048", "--resume", "--force-settings"]) == 0
    assert len(fake.built) == 3
    cfg = json.loads((tmp_path / "v.config.json").read_text())
    assert cfg["forced_resumes"][0]["differences"] == ["engine.max_model_len: 960 -> 2048"]


def test_the_error_summary_says_when_resume_needs_force_settings(fake, tmp_path, capsys):
    recs = [canonical_record(tmp_path, f"r{i}", 3) for i in range(2)]
    recs[1]["steps"][0]["screenshot"] = "img/gone.png"
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    assert main(["score", str(data), "--model", "m", "--out", str(tmp_path / "v.jsonl"), "--quiet"]) == 0
    closing = next(x for x in capsys.readouterr().err.splitlines() if "record(s) failed in this run" in x)
    assert "--resume with the same flags" in closing and "--max-model-len" in closing
    assert "also needs --force-settings" in closing


def test_quiet_prints_one_result_line(fake, data, tmp_path, capsys):
    out = tmp_path / "v.jsonl"
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--router", "rules",
                 "--no-fine"]) == 0
    cap = capsys.readouterr()
    assert cap.out.count("\n") == 1 and cap.err == ""  # no summary JSON, no bar
    line = cap.out.strip()
    assert line.startswith(f"{out}: 6 verdict(s), 6 scored, 0 unparsed, 0 error(s); this run 6 in ")
    assert "1.00 calls/traj" in line and "v.summary.json" in line
    assert json.loads((tmp_path / "v.summary.json").read_text())["n"] == 6  # still written


def test_quiet_silences_the_libraries_progress_bars(monkeypatch, tmp_path):
    """--quiet turns off the hub's and transformers' bars and vLLM's INFO logs and weight-loading bar before
    they are imported (a child process inherits the environment); a setting the user made is kept."""
    import argparse
    import warnings

    from adaptrubric_local.cli.score import quiet_libraries

    for k in ("HF_HUB_DISABLE_PROGRESS_BARS", "VLLM_LOGGING_LEVEL", "TQDM_DISABLE", "TRANSFORMERS_VERBOSITY",
              "VLLM_LOGGING_STREAM", "TORCH_CPP_LOG_LEVEL", "PYTHONWARNINGS"):
        monkeypatch.setenv(k, "")  # monkeypatch restores each afterwards
        monkeypatch.delenv(k)
    monkeypatch.setattr(warnings, "filters", list(warnings.filters))
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "DEBUG")
    args = argparse.Namespace(engine="vllm", vllm_engine_args='{"max_num_batched_tokens": 4096}')
    import os

    with quiet_libraries(args):
        assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1" and os.environ["VLLM_LOGGING_LEVEL"] == "DEBUG"
        assert os.environ["VLLM_LOGGING_STREAM"] == "ext://sys.stderr"  # vLLM logs to stdout by default
    assert json.loads(args.vllm_engine_args) == {"max_num_batched_tokens": 4096, "use_tqdm_on_load": False}
    # undone afterwards: a program that calls main(["score", ..., "--quiet"]) keeps its own environment
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ and "PYTHONWARNINGS" not in os.environ
    assert os.environ["VLLM_LOGGING_LEVEL"] == "DEBUG"
    args = argparse.Namespace(engine="vllm", vllm_engine_args='{"use_tqdm_on_load": true}')
    with quiet_libraries(args):
        pass
    assert json.loads(args.vllm_engine_args) == {"use_tqdm_on_load": True}


def test_ids_and_limit_score_a_subset_and_resume_the_rest(fake, tmp_path, capsys):
    recs = [canonical_record(tmp_path, f"r{i}", 3, label=i % 2) for i in range(10)]
    recs[2]["steps"][0]["screenshot"] = "img/gone.png"  # a bad record
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    out = tmp_path / "v.jsonl"
    flags = ["--model", "m", "--out", str(out), "--quiet", "--router", "rules", "--no-fine"]
    assert main(["score", str(data), *flags, "--limit", "4"]) == 0
    assert [r["id"] for r in _lines(out)] == ["r0", "r1", "r3", "r4"]  # the first 4 that loaded
    s = json.loads((tmp_path / "v.summary.json").read_text())
    assert s["subset"] == {"ids": None, "limit": 4, "by": "--limit 4", "trajectories": 4, "of": 10,
                           "bad_records_left_out": 1}
    assert "this run 4 of the 4 picked by --limit 4" in capsys.readouterr().out
    assert main(["score", str(data), *flags, "--ids", "r7", "r2", "--resume"]) == 0
    assert [r["id"] for r in _lines(out)][4:] == ["r2", "r7"]  # the bad record named: its error line
    assert json.loads((tmp_path / "v.summary.json").read_text())["subset"]["ids"] == ["r7", "r2"]
    capsys.readouterr()
    assert main(["score", str(data), *flags, "--ids", "r77", "--resume"]) == 2
    assert "--ids: r77: no such id in the data (did you mean r7?)" in capsys.readouterr().err
    assert main(["score", str(data), *flags, "--resume"]) == 0  # the rest, no --force-settings needed
    assert sorted(r["id"] for r in _lines(out)) == sorted(f"r{i}" for i in range(10))
    s = json.loads((tmp_path / "v.summary.json").read_text())
    assert "subset" not in s and s["n"] == 10
