"""Multi-worker scoring on the CPU with the tiny model: 2 workers write exactly the verdicts of a
one-process run, also when a worker is killed mid-run (the driver restarts it) or the driver itself is
killed and the run is resumed: no id lost, none duplicated."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from adaptrubric_local.distributed import parts_dir, read_lines, score_distributed
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.scoring import score_file

ROOT = Path(__file__).resolve().parents[1]
PIPE = PipelineConfig(verify_max_new_tokens=8, trajectories_per_batch=2)


@pytest.fixture(scope="module")
def setup(tiny_model, tmp_path_factory):
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig
    from adaptrubric_local.synth import synthesize

    work = tmp_path_factory.mktemp("dist")
    data = synthesize(work / "data", n_tasks=3, candidates=4, size=(90, 200))
    with open(data, "a") as fh:
        fh.write(json.dumps({"id": "bad", "instruction": "x", "steps": []}) + "\n")
    opts = {"model": str(tiny_model), "max_new_tokens": 8, "max_batch_size": 4}
    ref = work / "ref.jsonl"
    engine = HFEngine(HFEngineConfig(**opts))
    score_file(AdaptRubric(engine, PIPE), data, ref, progress=False)
    engine.close()
    return data, opts, [json.loads(x) for x in ref.read_text().splitlines()]


def rows(path: Path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def same(got, ref):
    assert [r["id"] for r in got] == [r["id"] for r in ref]  # every id once, in data order
    for g, r in zip(got, ref):
        for k in set(r) - {"cost_tokens", "cost_calls"}:  # shared router/cue costs split by batch: by design
            if isinstance(r[k], float):
                assert g[k] == pytest.approx(r[k], abs=1e-5), (r["id"], k)
            elif k not in ("error",):
                assert g[k] == r[k], (r["id"], k)
        assert (g["error"] is None) == (r["error"] is None)


def driver(data, out, opts, resume=False):
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(ROOT)!r})
        from adaptrubric_local.distributed import score_distributed
        from adaptrubric_local.pipeline import PipelineConfig
        score_distributed({str(data)!r}, {str(out)!r}, workers=2, pipeline=PipelineConfig(**{asdict(PIPE)!r}),
                          engine_options={opts!r}, resume={resume}, progress=False, gpus=0)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)


def wait_for_lines(out: Path, n: int = 1, timeout: float = 240):
    t0 = time.time()
    while time.time() - t0 < timeout:
        parts = list(parts_dir(out).glob("part-[0-9]*.jsonl")) if parts_dir(out).is_dir() else []
        if sum(len(read_lines(p)) for p in parts) >= n:
            return parts
        time.sleep(0.05)
    raise AssertionError("no verdict line appeared")


def test_killed_worker_is_restarted_and_nothing_is_lost(setup, tmp_path):
    data, opts, ref = setup
    out = tmp_path / "v.jsonl"
    proc = driver(data, out, opts)
    part = wait_for_lines(out)[0]
    rank = part.stem.split("-")[1]
    pid = int((parts_dir(out) / f"worker-{rank}.pid").read_text())
    os.kill(pid, signal.SIGKILL)  # mid-run: it has written some lines, not all
    assert proc.wait(300) == 0
    same(rows(out), ref)
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["restarts"] >= 1 and summary["missing"] == 0 and not parts_dir(out).exists()


def test_killed_driver_resumes(setup, tmp_path):
    data, opts, ref = setup
    out = tmp_path / "v.jsonl"
    proc = driver(data, out, opts)
    wait_for_lines(out, 2)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and both workers
    proc.wait(30)
    before = sum(len(read_lines(p)) for p in parts_dir(out).glob("part-*.jsonl"))
    assert 0 < before < len(ref)
    with pytest.raises(ValueError, match="--resume"):
        score_distributed(data, out, workers=2, pipeline=PIPE, engine_options=opts, progress=False, gpus=0)
    summary = score_distributed(data, out, workers=1, pipeline=PIPE, engine_options=opts, resume=True,
                                progress=False, gpus=0)  # the world size may change on resume
    same(rows(out), ref)
    assert summary["skipped_resume"] == before and summary["missing"] == 0
