"""Scoring on Ray (ray_scoring.py) with the tiny model on the CPU: `score --ray --replicas 2` writes
exactly the one-process verdicts and the same settings record; a replica killed mid-run is restarted
by Ray and nothing is lost or written twice; a file begun in one process resumes on Ray. The Ray tests
share one local Ray instance (2 CPUs), started once for this module."""
import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from adaptrubric_local.cli import build_parser, main
from adaptrubric_local.cli.common import engine_options, pipeline_config
from adaptrubric_local.pipeline import PipelineConfig
from adaptrubric_local.prompts import load_prompts
from adaptrubric_local.run_settings import settings_diff, sidecar
from adaptrubric_local.scale_out.ray import RayConfig, ReplicaPool, ReplicasGone, _Chunk, chunk_size, chunks, score_ray
from adaptrubric_local.types import Step, Trajectory

FLAGS = ["--verify-max-new-tokens", "8", "--max-batch-size", "2"]  # no --quiet: the summary JSON is printed


def traj(tid: str, instruction: str) -> Trajectory:
    return Trajectory(id=tid, instruction=instruction, steps=[Step(screenshot=None, action="tap(1)")])


def test_chunks_keep_each_instruction_whole_in_first_appearance_order():
    ts = [traj("a1", "A"), traj("b1", "B"), traj("a2", "A"), traj("c1", "C"), traj("b2", "B"), traj("d1", "D")]
    got = [[t.id for t in c] for c in chunks(ts, 3)]
    assert got == [["a1", "a2"], ["b1", "b2", "c1"], ["d1"]]
    assert [[t.id for t in c] for c in chunks(ts, 1)] == [["a1", "a2"], ["b1", "b2"], ["c1"], ["d1"]]
    assert sorted(t.id for c in chunks(ts, 4) for t in c) == sorted(t.id for t in ts)


def test_chunk_size_aims_at_four_chunks_per_replica_within_a_batch():
    assert chunk_size(1000, 2, 64) == 64
    assert chunk_size(12, 2, 8) == 2
    assert chunk_size(3, 4, 8) == 1


def test_ray_config_is_checked():
    for bad in ({"replicas": 0}, {"gpus_per_replica": -1}, {"cpus_per_replica": 0}, {"max_attempts": 0}):
        with pytest.raises(ValueError):
            RayConfig(**bad)


def test_a_chunk_that_kills_its_replica_is_sent_again_then_becomes_error_lines(capsys):
    from collections import deque

    pool = ReplicaPool(PipelineConfig(), {}, RayConfig(max_attempts=2), stamp={"model": "m", "bank_sha": "b"})
    chunk, pending, seen = _Chunk([traj("a1", "A"), traj("a2", "A")]), deque(), {"a2"}
    assert list(pool._died(0, chunk, OSError("gone"), pending, seen)) == [] and list(pending) == [chunk]
    assert "sent again (attempt 2 of 2)" in capsys.readouterr().err
    pending.clear()
    (v,) = pool._died(1, chunk, OSError("gone"), pending, seen)  # a2 was written already: not again
    assert (v.id, v.status, v.model, v.bank_sha, v.score) == ("a1", "error", "m", "b", None)
    assert "died 2 times (OSError); rerun with --resume" in v.error and not pending
    assert pool.summary()["runtime"] == {**pool.runtime(), "chunks": 0, "replica_deaths": 2, "resent_chunks": 1,
                                         "failed_chunks": 1}


def test_an_id_already_written_is_never_written_again_whatever_delivers_it():
    """No path delivers an id twice (ray_scoring's docstring lists them); the driver's guard holds anyway:
    of a chunk's result only the ids not yet written are handed on, each once."""
    from adaptrubric_local.types import Verdict

    pool = ReplicaPool(PipelineConfig(), {}, RayConfig())
    seen = {"a1"}
    result = {"pid": 7, "verdicts": [Verdict(id="a1"), Verdict(id="a2"), Verdict(id="a2"), Verdict(id="a3")],
              "engine": None, "route_unparsed": 0, "cue_unparsed": 0}
    assert [v.id for v in pool._take(0, result, seen)] == ["a2", "a3"] and seen == {"a1", "a2", "a3"}
    assert pool.counts["chunks"] == 1 and pool.pids == {0: 7}


def test_workers_is_an_unknown_flag_and_replica_flags_need_ray(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text("")
    with pytest.raises(SystemExit) as exc:  # removed: an unknown flag
        main(["score", str(data), "--model", "m", "--out", str(tmp_path / "v.jsonl"), "--workers", "2"])
    assert exc.value.code == 2 and "unrecognized arguments: --workers 2" in capsys.readouterr().err
    assert main(["score", str(data), "--model", "m", "--out", str(tmp_path / "v.jsonl"), "--replicas", "2"]) == 2
    assert "--replicas need(s) --ray" in capsys.readouterr().err


# ----------------------------------------------------------------------------- on a local Ray
@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def setup(tiny_model, tmp_path_factory):
    """12 trajectories (3 instructions x 4) and a bad record, scored once in this process by `score`."""
    from adaptrubric_local.synth import synthesize

    work = tmp_path_factory.mktemp("ray")
    data = synthesize(work / "data", n_tasks=3, candidates=4, size=(90, 200))
    with open(data, "a") as fh:
        fh.write(json.dumps({"id": "bad", "instruction": "x", "steps": []}) + "\n")
    ref = work / "ref.jsonl"
    assert main(["score", str(data), "--model", str(tiny_model), "--out", str(ref), *FLAGS]) == 0
    return data, str(tiny_model), ref


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def same_verdicts(got: list[dict], ref: list[dict]) -> None:
    """Every id once, and each line as the one-process run wrote it (scores, raw texts, costs, ...)."""
    ids = [r["id"] for r in got]
    assert len(ids) == len(set(ids)) and set(ids) == {r["id"] for r in ref}
    by_id = {r["id"]: r for r in got}
    for r in ref:
        g = by_id[r["id"]]
        assert set(g) == set(r)
        for k, v in r.items():
            assert g[k] == (pytest.approx(v, abs=1e-6) if isinstance(v, float) else v), (r["id"], k)


def test_score_ray_writes_the_one_process_verdicts(setup, local_ray, tmp_path, capsys):
    data, model, ref = setup
    out = tmp_path / "v.jsonl"
    assert main(["score", str(data), "--model", model, "--out", str(out), *FLAGS, "--ray", "--replicas", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    same_verdicts(rows(out), rows(ref))
    assert any(r["status"] == "error" and r["id"] == "bad" for r in rows(out))
    assert summary["n"] == 13 and summary["runtime"]["replicas"] == 2 and summary["runtime"]["chunks"] == 3
    # one settings record: the same keys and no verdict-deciding difference, whatever ran the scoring
    a, b = json.loads(sidecar(ref, "config").read_text()), json.loads(sidecar(out, "config").read_text())
    assert set(a) == set(b) and settings_diff(a, b) == []
    assert a["runtime"] == {"mode": "in-process"} and b["runtime"]["mode"] == "ray"
    assert b["prompts_sha"] == a["prompts_sha"] == load_prompts().sha and b["bank_sha"] and b["model"] == model
    ref_summary = json.loads(sidecar(ref, "summary").read_text())
    for k in ("n", "scored", "unparsed", "errors", "calls_per_traj", "tokens_per_traj", "model", "bank_sha"):
        assert summary[k] == ref_summary[k], k


def test_a_replica_killed_mid_run_loses_nothing(setup, local_ray, tmp_path):
    data, model, ref = setup
    args = build_parser().parse_args(["score", str(data), "--model", model, "--out", "x", *FLAGS])
    cfg = pipeline_config(args)
    killed = []

    def kill_the_replica_just_given_a_chunk(pool):
        if not killed:
            r = list(pool.busy)[-1]  # dispatched a moment ago: it is mid-chunk
            killed.append(pool.pids[r])
            os.kill(pool.pids[r], signal.SIGKILL)

    out = tmp_path / "v.jsonl"
    summary = score_ray(data, out, cfg, engine_options(args, cfg), RayConfig(replicas=2), progress=False,
                        on_chunk=kill_the_replica_just_given_a_chunk)
    assert killed
    run = summary["runtime"]
    assert run["replica_deaths"] == 1 and run["resent_chunks"] == 1 and run["failed_chunks"] == 0
    same_verdicts(rows(out), rows(ref))  # nothing lost, nothing twice


def test_an_in_process_file_resumes_on_ray(setup, local_ray, tmp_path, capsys):
    data, model, ref = setup
    out = tmp_path / "v.jsonl"
    lines = ref.read_text().splitlines(keepends=True)
    assert any(json.loads(x)["id"] == "bad" for x in lines)  # its error line, written when the data reaches it
    # begun in one process, killed mid-write after the first instruction's 4 verdicts (lines come in completion
    # order, so they are picked by id: the resumed run then shares no router or cue call with the first)
    first = [x for x in lines if json.loads(x)["id"] == "bad" or json.loads(x)["id"].startswith("t000")]
    out.write_text("".join(first) + next(x for x in lines if x not in first)[:20])
    shutil.copy(sidecar(ref, "config"), sidecar(out, "config"))
    assert main(["score", str(data), "--model", model, "--out", str(out), *FLAGS, "--ray", "--resume"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # the 4 verdicts are kept; the bad record's error line is retried and, the same word for word, not repeated
    assert summary["skipped_resume"] == 4 and summary["this_run"]["n"] == 9 and summary["retried_errors"] == 1
    assert summary["n"] == 13  # the summary describes the whole file
    same_verdicts(rows(out), rows(ref))  # no --force-settings needed: the same settings record
    assert main(["score", str(data), "--model", model, "--out", str(out), *FLAGS, "--resume"]) == 0  # and back
    back = json.loads(capsys.readouterr().out)
    assert back["skipped_resume"] == 12 and back["this_run"]["n"] == back["this_run"]["errors"] == 1  # the bad record
    assert (back["n"], back["errors"]) == (13, 1)
    assert json.loads(sidecar(out, "config").read_text())["runtime"] == {"mode": "in-process"}
    same_verdicts(rows(out), rows(ref))


def test_replicas_that_cannot_load_the_model_stop_the_run_with_their_error(setup, local_ray, tmp_path):
    data, _, _ = setup
    not_a_model = tmp_path / "empty"
    not_a_model.mkdir()
    with pytest.raises(ReplicasGone) as err:
        score_ray(data, tmp_path / "v.jsonl", PipelineConfig(), {"model": str(not_a_model)}, RayConfig(),
                  progress=False)
    assert "no Ray replica is left" in str(err.value) and str(not_a_model) in str(err.value)
    assert [r["id"] for r in rows(tmp_path / "v.jsonl")] == ["bad"]  # what could be written is kept
