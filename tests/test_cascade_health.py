"""A judge that stops answering mid-run (adaptrubric_local/cascade/health.py, engine/cutoff.py): the
judge is a real server process (tests/judge_process.py) that freezes itself with SIGSTOP, holding its
connections open, or exits; `score` says so on stderr within seconds, keeps the student's verdicts
for the lines the judge did not answer and finishes the rest without waiting --judge-timeout per call."""
import json
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
from openai_stub import Running, Stub, file_pixels

from adaptrubric_local.cascade import health, live
from adaptrubric_local.cli import main

from conftest import make_png, write_jsonl

N = 40


@pytest.fixture(autouse=True)
def quick_watcher(monkeypatch):
    """The watcher probes every second with a 2 s timeout (its defaults, health.CHECK_EVERY and
    PROBE_TIMEOUT, are 5 s each), so a stop is seen sooner; what the tests check is the same."""
    monkeypatch.setattr(live, "JudgeHealth", partial(health.JudgeHealth, check_every=1.0, probe_timeout=2.0))


def make_data(root: Path):
    recs, truth = [], {}
    for k in range(N):
        tid, label = f"t{k:02d}", k % 2
        steps = [{"screenshot": f"img/{tid}_{i}.png", "action": f"tap({i})"} for i in range(2)]
        for i, s in enumerate(steps):
            make_png(root / s["screenshot"], seed=2 * k + i)
        truth[file_pixels(root / steps[-1]["screenshot"])] = label
        recs.append({"id": tid, "instruction": f"Turn on setting {k}.", "steps": steps, "label": label})
    return write_jsonl(root / "trajs.jsonl", recs), truth


class Stamped:
    """sys.stderr, each write kept with its time."""

    def __init__(self, inner):
        self.inner, self.writes = inner, []

    def write(self, text):
        self.writes.append((time.time(), text))
        return self.inner.write(text)

    def flush(self):
        self.inner.flush()

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("mode", ["freeze", "kill"])
def test_a_judge_that_stops_answering_is_said_at_once_and_the_run_goes_on(tmp_path, monkeypatch, mode):
    path, truth = make_data(tmp_path)
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps(truth))
    judge = subprocess.Popen([sys.executable, str(Path(__file__).parent / "judge_process.py"), str(scores), "judge",
                              "6", mode], stdout=subprocess.PIPE, text=True)
    student = Running(Stub(truth, served="student"))
    try:
        url = judge.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        err = Stamped(sys.stderr)
        monkeypatch.setattr(sys, "stderr", err)
        out = tmp_path / "v.jsonl"
        rc = main(["score", str(path), "--openai-url", student.url, "--model", "student", "--judge-url", url,
                   "--judge-name", "judge", "--escalate-band", "0", "1", "--spot-check", "0",
                   "--trajectories-per-batch", "2", "--judge-concurrency", "2", "--out", str(out), "--quiet"])
        finished = time.time()
    finally:
        student.close()
        judge.send_signal(signal.SIGKILL)
        judge.wait()
    assert rc == 0
    stopped = float((tmp_path / "scores.json.stopped").read_text())
    said = [(t, s) for t, s in err.writes if "is not answering" in s]
    assert said, "nothing on stderr said the judge stopped answering"
    print(f"{mode}: said after {said[0][0] - stopped:.1f} s, finished {finished - stopped:.1f} s after the judge "
          "stopped")
    assert said[0][0] - stopped < 15 and "the student's verdicts stand" in said[0][1]
    assert finished - stopped < 60  # not --judge-timeout (300 s) per call
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(d["id"] for d in lines) == [f"t{k:02d}" for k in range(N)]  # no line lost
    failed = [d for d in lines if d["judge_error"]]
    judged = [d for d in lines if d["decided_by"] == "judge"]
    assert len(judged) >= 3 and len(failed) >= N // 2 and len(failed) + len(judged) == N
    assert all(d["decided_by"] == "student" and d["model"].startswith("student@") for d in failed)
    c = json.loads(out.with_suffix(".summary.json").read_text())["cascade"]
    assert c["judge_failed"] == len(failed) and c["decided_by"]["judge"] == len(judged)


def test_a_reward_models_judge_that_freezes_is_logged_and_the_rewards_go_on(tmp_path, caplog):
    """RewardModel(judge={"judge_url": ...}) (cascade/live.py): the same watcher; the rewards of the rollouts the
    judge did not answer are the student's, and the WARNING says the judge is not answering."""
    from adaptrubric_local.dry_run import FakeEngine, pipeline_script
    from adaptrubric_local.pipeline import PipelineConfig
    from adaptrubric_local.rewards.model import RewardModel

    recs, truth = [], {}
    for i in range(12):
        make_png(tmp_path / f"s{i}.png", seed=3 * i)
        truth[file_pixels(tmp_path / f"s{i}.png")] = i % 2
        recs.append({"id": f"r{i}", "instruction": f"Turn on Wi-Fi (r{i}).", "steps": [{"screenshot": f"s{i}.png"}]})
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps(truth))
    judge = subprocess.Popen([sys.executable, str(Path(__file__).parent / "judge_process.py"), str(scores), "judge",
                              "3", "freeze"], stdout=subprocess.PIPE, text=True)

    def student(req):  # always 1, sure of it
        return pipeline_script(req) if req.kind != "verify" else (
            "Checked.\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none")

    try:
        url = judge.stdout.readline().strip()
        rm = RewardModel(engine=FakeEngine(script=student), data_root=str(tmp_path),
                         pipeline=PipelineConfig(router="rules", fine=False, trajectories_per_batch=2),
                         judge={"judge_url": url, "judge_name": "judge", "spot_check": 1.0, "judge_concurrency": 1})
        t0 = time.time()
        with caplog.at_level("WARNING", logger="adaptrubric.cascade"):
            rewards = rm.rewards(recs) + rm.rewards(recs[:4])
        took = time.time() - t0
        stats = rm.stats["cascade"]
        rm.close()
    finally:
        judge.send_signal(signal.SIGKILL)
        judge.wait()
    assert len(rewards) == 16 and took < 60, took
    assert "is not answering" in caplog.text and "`score --resume`" not in caplog.text
    assert stats["judge_failed"] >= 8 and stats["decided_by_judge"] + stats["judge_failed"] == 16
