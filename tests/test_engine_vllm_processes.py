"""vLLM's processes (engine/vllm_processes.py): a stopped command leaves none behind. Everywhere: the
last resort (`kill_leftovers`, after vLLM's own SIGTERM and wait) ends a process that ignores SIGTERM.
In .venv-vllm (`make test-vllm`, ADAPTRUBRIC_REQUIRE_VLLM=1: no skip there), as a user runs it: `score
--engine vllm` on the tiny model, sent SIGTERM (to its pid, as `kill` does) mid-run, then resumed and
sent SIGINT (to its process group, as Ctrl-C in a terminal does), then resumed to the end: each stop
exits 143 / 130 with its one line, writes the summary, and 10 s after the signal no process of the run
is left (`VLLM::EngineCore` and `VLLM::Worker` seen running before it; every process of the run's
session counted, orphans too); the file ends with every trajectory once. One vLLM start per signal
(about 40 s each on 2 quiet cores), and one to finish."""
from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time

import pytest
from stop_support import session, stop_mid_run
from vllm_support import require_vllm

from adaptrubric_local.engine.vllm_processes import kill_leftovers
from adaptrubric_local.stopping import STOP_GRACE_S

N = 40  # trajectories: one per engine batch, so the run is still going when the first lines are out


def test_the_last_resort_ends_a_process_that_ignores_sigterm():
    import psutil

    code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
            "time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    t0 = time.monotonic()
    assert kill_leftovers([psutil.Process(proc.pid)], grace=10.0) == [proc.pid]
    assert time.monotonic() - t0 < 5  # it ended (a zombie is not waited for) well before the grace
    assert proc.wait(5) == -signal.SIGKILL
    assert kill_leftovers([psutil.Process()] * 0) == []  # nothing left: nothing signalled


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The tiny model, N small synthetic trajectories, and the `score --engine vllm` command on them."""
    require_vllm()
    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.tiny import make_tiny_model
    from adaptrubric_local.synth import synthesize

    root = tmp_path_factory.mktemp("vllm-stop")
    model = make_tiny_model(root / "tiny", corpus=tokenizer_corpus())
    data = synthesize(root / "synth", n_tasks=N // 4, candidates=4, size=(96, 192))
    out = root / "v.jsonl"
    cmd = [sys.executable, "-m", "adaptrubric_local.cli", "score", str(data), "--out", str(out), "--engine", "vllm",
           "--model", str(model), "--enforce-eager", "--max-num-seqs", "2", "--dtype", "fp32", "--router", "rules",
           "--no-fine", "--verify-max-new-tokens", "8", "--trajectories-per-batch", "1", "--quiet"]
    return {"cmd": cmd, "out": out}


def _stopped(run, cmd, sig, group):
    code, err, left, seen = stop_mid_run(cmd, run["out"], sig, 1, group=group)
    names = {s.split(" ", 1)[1] for s in seen}
    assert {"VLLM::EngineCore", "VLLM::Worker"} & names, f"no vLLM process in the run's session: {seen}"
    assert not left, f"{signal.Signals(sig).name}: still running 10 s later: {left}\n{err[-3000:]}"
    assert code == 128 + sig, (code, err[-3000:])
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"adaptrubric: stopped by {signal.Signals(sig).name}: "), err[-3000:]
    written = run["out"].read_text().count("\n")
    summary = json.loads(run["out"].with_suffix(".summary.json").read_text())
    assert summary["stopped"] == {"by": signal.Signals(sig).name, "left": N - written}
    assert summary["n"] == written < N
    resume = shlex.split(last.split("resume with: ", 1)[1])
    assert resume[0] == "adaptrubric" and resume.count("--resume") == 1
    return [sys.executable, "-m", "adaptrubric_local.cli", *resume[1:]]


def test_score_engine_vllm_stopped_by_sigterm_and_by_ctrl_c_leaves_nothing_and_resumes(run):
    resume = _stopped(run, run["cmd"], signal.SIGTERM, group=False)
    resume = _stopped(run, resume, signal.SIGINT, group=True)
    done = subprocess.run(resume, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    ids = [json.loads(x)["id"] for x in run["out"].read_text().splitlines()]
    assert len(ids) == N == len(set(ids))
    summary = json.loads(run["out"].with_suffix(".summary.json").read_text())
    assert summary["n"] == N and "stopped" not in summary


def test_score_engine_vllm_stopped_while_vllm_starts_leaves_nothing(run):
    """SIGTERM once vLLM's engine core is running but before vLLM is ready (a stop in its ~40 s start):
    pyzmq's poll in vLLM's start-up handshake swallows the exception the handler raises, so the grace
    of stopping.py ends the command (its children killed): nothing of the run left, exit 143."""
    out = run["out"].with_name("starting.jsonl")
    cmd = [out if a == str(run["out"]) else a for a in run["cmd"]]
    cmd = [str(a) for a in cmd]
    started = lambda pid: any(s.split(" ", 1)[1].startswith("VLLM::") for s in session(pid))  # noqa: E731
    code, err, left, seen = stop_mid_run(cmd, out, signal.SIGTERM, when=started, within=STOP_GRACE_S + 10)
    assert not left, f"still running {STOP_GRACE_S + 10:.0f} s later: {left}\n{err[-3000:]}"
    assert code == 143, (code, err[-3000:])
    assert err.strip().splitlines()[-1].startswith("adaptrubric: stopped by SIGTERM"), err[-3000:]
    assert not out.exists() or not out.read_text()  # nothing was scored
