"""vLLM's processes (engine/vllm_processes.py): a stopped command leaves none behind. Everywhere: the
last resort (`kill_leftovers`, after vLLM's own SIGTERM and wait) ends a process that ignores SIGTERM.
In .venv-vllm (`make test-vllm`, ADAPTRUBRIC_REQUIRE_VLLM=1: no skip there), as a user runs it: `score
--engine vllm --quiet` on the tiny model, sent SIGTERM (to its pid, as `kill` does) mid-run, then resumed
and sent SIGINT (to its process group, as Ctrl-C in a terminal does), then resumed to the end:
each stop exits 143 / 130 with its one line, writes the summary, and 10 s after the signal no process
of the run is left (`VLLM::EngineCore` and `VLLM::Worker` seen running before it; every process of the
run's session counted, orphans too); the file ends with every trajectory once. Stdout holds the
command's output only (nothing for a stopped run, the summary JSON for the last; vLLM's logs go to
stderr), and the first run's --quiet leaves only its one line on stderr. (Ctrl-C reaches vLLM's
worker too, whose engine core then logs the batch it was running at ERROR level: not silenced.)
Stopped while it starts (as vLLM is imported, and 5 s after vLLM's engine core appears, where vLLM's
handshake swallowed the signal): the same, the summary saying nothing was scored. One vLLM start per
signal (about 40 s each on 2 quiet cores), and one to finish."""
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

from adaptrubric_local.engine import vllm_processes
from adaptrubric_local.engine.vllm_processes import kill_leftovers, stop_llm
from adaptrubric_local.stopping import Stopped

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


def test_a_stop_during_vllms_shutdown_still_kills_what_the_engine_started(monkeypatch):
    from types import SimpleNamespace

    killed = []
    monkeypatch.setattr(vllm_processes, "kill_leftovers", lambda processes: killed.append(list(processes)))

    class Client:
        def shutdown(self):
            raise Stopped(signal.SIGTERM)  # the signal arrives while vLLM waits for its engine core

    with pytest.raises(Stopped):
        stop_llm(SimpleNamespace(llm_engine=SimpleNamespace(engine_core=Client())), ["core", "worker"])
    assert killed == [["core", "worker"]]


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
           "--no-fine", "--verify-max-new-tokens", "8", "--trajectories-per-batch", "1"]
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
    resume = _stopped(run, [*run["cmd"], "--quiet"], signal.SIGTERM, group=False)
    err = run["out"].with_name(f"stderr-{signal.SIGTERM}.txt").read_text().splitlines()
    assert len(err) == 1 and err[0].startswith("adaptrubric: stopped by SIGTERM: "), err  # --quiet: no library line
    resume = _stopped(run, [a for a in resume if a != "--quiet"], signal.SIGINT, group=True)
    for sig in (signal.SIGTERM, signal.SIGINT):  # stdout: the output only (a stopped run has none); logs on stderr
        assert run["out"].with_name(f"stdout-{sig}.txt").read_text() == "", sig
    done = subprocess.run(resume, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    ids = [json.loads(x)["id"] for x in run["out"].read_text().splitlines()]
    assert len(ids) == N == len(set(ids))
    summary = json.loads(run["out"].with_suffix(".summary.json").read_text())
    assert summary["n"] == N and "stopped" not in summary
    assert json.loads(done.stdout) == summary, done.stdout[:2000]  # stdout is the summary, nothing else


def test_score_engine_vllm_stopped_while_it_starts_ends_within_10_s_with_its_summary(run):
    """SIGTERM once the command has printed its first line (vLLM's, as it is imported) and 5 s after vLLM's
    engine core appears (its start-up handshake, where pyzmq's poll swallows the exception the handler raises: the
    stop is rescued, stopping.rescue_stop): exit 143 within 10 s, nothing of the run left, the summary
    of what was done (nothing, or what the first batch wrote if vLLM was up by then) and its one line."""
    started = lambda pid: any(s.split(" ", 1)[1].startswith("VLLM::") for s in session(pid))  # noqa: E731
    for name in ("vllm-imported", "engine-core"):
        out = run["out"].with_name(f"starting-{name}.jsonl")
        printed = _printed(out.with_name(f"stderr-{signal.SIGTERM}.txt"))
        when = _after(0.0, printed) if name == "vllm-imported" else _after(5.0, started)
        cmd = [str(out) if a == str(run["out"]) else a for a in run["cmd"]]
        code, err, left, _seen = stop_mid_run(cmd, out, signal.SIGTERM, when=when)
        assert not left, f"{name}: still running 10 s later: {left}\n{err[-3000:]}"
        assert code == 143, (name, code, err[-3000:])
        assert err.strip().splitlines()[-1].startswith("adaptrubric: stopped by SIGTERM: "), err[-3000:]
        summary = json.loads(out.with_suffix(".summary.json").read_text())
        written = out.read_text().count("\n")
        assert summary["stopped"] == {"by": "SIGTERM", "left": N - written} and summary["n"] == written < N, name


def _printed(err):
    """A moment for stop_mid_run: the run has written to its stderr file `err`."""
    return lambda pid: err.exists() and err.stat().st_size > 0


def _after(seconds: float, first=lambda pid: True):
    """A moment for stop_mid_run: `seconds` after `first(pid)` is first true."""
    since = {}

    def when(pid) -> bool:
        if "t" not in since and first(pid):
            since["t"] = time.monotonic()
        return "t" in since and time.monotonic() - since["t"] >= seconds
    return when
