"""A judge that stops answering mid-run (adaptrubric_local/cascade/health.py, engine/cutoff.py): the
judge is a real server process (tests/judge_process.py) that freezes itself with SIGSTOP, holding its
connections open, or exits; `score` says so on stderr within seconds, keeps the student's verdicts
for the lines the judge did not answer and finishes the rest without waiting --judge-timeout per call."""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from openai_stub import Running, Stub, file_pixels

from adaptrubric_local.cli import main

from conftest import make_png, write_jsonl

N = 40


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
