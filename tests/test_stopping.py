"""Stopping a command (stopping.py): SIGTERM and SIGINT become `Stopped` inside the command, so its
clean-up runs; a stopped `score` closes its engine, writes the summary of what it did (marked
`stopped`), prints one line (what was written, the command that resumes) and exits 143 / 130, and
`--resume` completes the file. In process on the scripted engine, then as a user runs it: a
transformers run on the tiny model sent SIGTERM, resumed and sent SIGINT, resumed to the end, with
no process of the run left. (The same for `score --engine vllm`, whose engine core and workers are
child processes: test_engine_vllm_processes.py, in .venv-vllm.)"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
from stop_support import stop_mid_run

from adaptrubric_local import FakeEngine
from adaptrubric_local.cli import main, resume_command
from adaptrubric_local.engine import build
from adaptrubric_local.stopping import Stopped, stop_on_signals, stop_reason

from conftest import canonical_record, write_jsonl

VERIFY_ONLY = ["--router", "rules", "--no-fine", "--trajectories-per-batch", "1", "--quiet"]


def test_a_signal_becomes_stopped_once_and_the_old_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Stopped) as caught, stop_on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends
    assert (caught.value.name, caught.value.exit_code) == ("SIGTERM", 143)
    assert isinstance(caught.value, KeyboardInterrupt)  # code that lets Ctrl-C through lets it through
    assert signal.getsignal(signal.SIGTERM) == before
    with pytest.raises(Stopped) as first, stop_on_signals(grace=1.0):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    time.sleep(1.5)  # the block was left in time: the grace has nothing to end
    assert first.value.exit_code == 130
    assert stop_reason(first.value) == "SIGINT" and stop_reason(KeyboardInterrupt()) == "SIGINT"
    assert stop_reason(RuntimeError("boom")) == "RuntimeError: boom"


@pytest.mark.parametrize("second", [True, False])
def test_a_stop_that_does_not_finish_ends_at_once(second, tmp_path):
    """A second signal, or a block still running `grace` s after the first (a library swallowed the
    exception), ends the process: child processes killed, exit 143, one line saying why."""
    code = ("import signal, subprocess, sys, time; from adaptrubric_local.stopping import stop_on_signals\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "with stop_on_signals(grace=5.0):\n"
            "    ready = False\n"
            "    while True:\n"
            "        try:\n"
            "            if not ready:  # said inside the try: a signal from now on is swallowed\n"
            "                ready = True\n"
            "                print(child.pid, flush=True)\n"
            "            time.sleep(60)\n"
            "        except BaseException:\n"
            "            print('swallowed', flush=True)  # as pyzmq's retried poll does\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().strip() == "swallowed"
    if second:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 143
    assert (time.monotonic() - t0 < 4.5) if second else (time.monotonic() - t0 >= 5.0)  # the grace: 5 s
    err = proc.stderr.read().strip().splitlines()
    assert len(err) == 1 and err[0].startswith("adaptrubric: stopped by SIGTERM (")
    assert ("a second signal" in err[0]) is second
    import psutil

    time.sleep(0.5)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_a_stop_a_library_swallows_is_rescued_in_a_second(tmp_path):
    """Inside `rescue_stop`, a library that swallows the exception at its poll (as pyzmq's does in vLLM's
    start-up handshake) and then waits on a lock: `on_stop` ends what it polls, the signal is sent again
    until the exception gets through, and the command stops in about a second, not at the grace's end."""
    code = ("import sys, threading, time; from adaptrubric_local.stopping import rescue_stop, stop_on_signals\n"
            "polled_ended = threading.Event()\n"
            "def library():\n"
            "    ready = False\n"
            "    while not polled_ended.is_set():\n"
            "        try:\n"
            "            if not ready:  # said inside the try: a signal from now on is swallowed\n"
            "                ready = True\n"
            "                print('ready', flush=True)\n"
            "            time.sleep(0.05)\n"
            "        except BaseException:\n"
            "            print('swallowed', flush=True)\n"
            "    threading.Event().wait()  # a reply that never comes: only a signal ends this wait\n"
            "try:\n"
            "    with stop_on_signals(grace=30.0), rescue_stop(polled_ended.set):\n"
            "        library()\n"
            "except KeyboardInterrupt as stop:\n"
            "    print('stopped', stop.name, flush=True)\n"
            "    sys.exit(stop.exit_code)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the swallowed stop was not rescued: still running 10 s after the signal")
    assert time.monotonic() - t0 < 5 and code == 143
    assert proc.stdout.read().split() == ["swallowed", "stopped", "SIGTERM"], proc.stderr.read()


def test_a_stopped_command_ends_its_process_without_the_interpreters_finalisation(data, tmp_path):
    """`adaptrubric` (main() on the process's own command line) stopped by a signal ends the process once its
    clean-up has run (the summary written, the engine closed): no atexit hook, no garbage collection."""
    out = tmp_path / "v.jsonl"
    code = ("import atexit, sys, time\n"
            "atexit.register(print, 'finalised', file=sys.stderr, flush=True)\n"
            "from adaptrubric_local import FakeEngine\n"
            "from adaptrubric_local.cli import main\n"
            "from adaptrubric_local.engine import build\n"
            "slow = lambda req: time.sleep(0.3) or 'SCORE: 1\\nEVIDENCE_SUFFICIENT: yes\\nMISSING_EVIDENCE: none'\n"
            "build.build_engine = lambda **kw: FakeEngine(script=slow, name='fake-model')\n"
            "sys.exit(main())\n")
    cmd = [sys.executable, "-c", code, "score", str(data), "--model", "m", "--out", str(out), *VERIFY_ONLY]
    code, err, left, _ = stop_mid_run(cmd, out, signal.SIGTERM, 1)
    assert code == 143 and not left, (code, err)
    assert err.strip().splitlines()[-1].startswith("adaptrubric: stopped by SIGTERM: ")
    assert json.loads(out.with_suffix(".summary.json").read_text())["stopped"]["by"] == "SIGTERM"
    assert "finalised" not in err, err


def test_the_resume_command_is_the_command_with_resume_once():
    got = resume_command(["score", "my data", "--out", "v.jsonl"])
    assert got == "adaptrubric score 'my data' --out v.jsonl --resume"
    assert resume_command(["score", "d", "--resume"]) == "adaptrubric score d --resume"


@pytest.fixture
def data(tmp_path):
    return write_jsonl(tmp_path / "d.jsonl", [canonical_record(tmp_path, f"r{k}", 3, label=k % 2) for k in range(6)])


def _fake(monkeypatch, act_on_verify):
    """The CLI's engine: a FakeEngine whose verifier calls run `act_on_verify(n)` (n: how many so far)."""
    calls = []

    def script(req):
        if req.kind == "verify":
            calls.append(req)
            act_on_verify(len(calls))
        return "SCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"

    eng = FakeEngine(script=script, name="fake-model")
    eng.closed = 0

    def close():
        eng.closed += 1

    eng.close = close
    monkeypatch.setattr(build, "build_engine", lambda **kw: eng)
    return eng


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_score_closes_its_engine_writes_its_summary_and_says_how_to_resume(sig, monkeypatch, data,
                                                                                     tmp_path, capsys):
    out = tmp_path / "v.jsonl"
    argv = ["score", str(data), "--model", "m", "--out", str(out), *VERIFY_ONLY]
    eng = _fake(monkeypatch, lambda n: n == 3 and os.kill(os.getpid(), sig))
    assert main(argv) == 128 + sig
    assert eng.closed == 1
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 2  # the third trajectory's verifier call was under way
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["stopped"] == {"by": signal.Signals(sig).name, "left": 4} == summary["this_run"]["stopped"]
    assert summary["n"] == 2 and summary["scored"] == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"adaptrubric: stopped by {signal.Signals(sig).name}: 2 verdict line(s) written to {out}")
    assert "4 trajectory(ies) left" in err[0]
    resume = err[0].split("resume with: ", 1)[1]
    assert resume == shlex.join(["adaptrubric", *argv, "--resume"])

    eng = _fake(monkeypatch, lambda n: None)
    assert main(shlex.split(resume)[1:]) == 0
    assert eng.closed == 1
    ids = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert sorted(ids) == [f"r{k}" for k in range(6)]  # completed, nothing twice
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert "stopped" not in summary and summary["n"] == 6


def test_a_score_stopped_while_its_model_loads_writes_the_summary_of_nothing(monkeypatch, data, tmp_path, capsys):
    def loading(**kw):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends

    monkeypatch.setattr(build, "build_engine", loading)
    out = tmp_path / "v.jsonl"
    assert main(["score", str(data), "--model", "m", "--out", str(out), *VERIFY_ONLY]) == 143
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["stopped"] == {"by": "SIGTERM", "left": 6} and summary["n"] == 0 and out.read_text() == ""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"adaptrubric: stopped by SIGTERM: 0 verdict line(s) written to {out}")


def test_a_crash_inside_the_pipeline_closes_the_engine_and_writes_the_summary(monkeypatch, data, tmp_path):
    out = tmp_path / "v.jsonl"

    def crash(n):
        if n == 2:
            raise RuntimeError("the engine fell over")

    eng = _fake(monkeypatch, crash)
    with pytest.raises(RuntimeError, match="fell over"):
        main(["score", str(data), "--model", "m", "--out", str(out), *VERIFY_ONLY])
    assert eng.closed == 1
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["stopped"] == {"by": "RuntimeError: the engine fell over", "left": 5} and summary["n"] == 1


# ----------------------------------------------------------------------------- as a user runs it: transformers
def test_score_transformers_stopped_by_sigterm_then_sigint_and_resumed(tiny_model, synth_set, tmp_path):
    out = tmp_path / "v.jsonl"
    cmd = [sys.executable, "-m", "adaptrubric_local.cli", "score", str(synth_set), "--model", str(tiny_model),
           "--out", str(out), "--max-batch-size", "1", "--verify-max-new-tokens", "8", *VERIFY_ONLY]
    code, err, left, _ = stop_mid_run(cmd, out, signal.SIGTERM, 2)
    assert code == 143 and not left, (code, left, err[-3000:])
    last = err.strip().splitlines()[-1]
    assert last.startswith("adaptrubric: stopped by SIGTERM: ") and "Traceback" not in err
    written = out.read_text().count("\n")
    assert f"{written} verdict line(s) written" in last and f"{24 - written} trajectory(ies) left" in last
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["stopped"]["by"] == "SIGTERM" and summary["n"] == written

    resume = shlex.split(last.split("resume with: ", 1)[1])
    assert resume[0] == "adaptrubric" and resume[-1] == "--resume"
    resume = [sys.executable, "-m", "adaptrubric_local.cli", *resume[1:]]
    code, err, left, _ = stop_mid_run(resume, out, signal.SIGINT, 2)
    assert code == 130 and not left, (code, left, err[-3000:])
    assert err.strip().splitlines()[-1].startswith("adaptrubric: stopped by SIGINT: ")
    assert json.loads(out.with_suffix(".summary.json").read_text())["stopped"]["by"] == "SIGINT"

    done = subprocess.run(resume, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # --quiet: its one result line on stdout; on stderr the package's own lines (what is resumed, the note on
    # the token cap the random model's replies hit), no bar or library log
    assert len(done.stdout.splitlines()) == 1 and done.stdout.startswith(f"{out}: 24 verdict(s)"), done.stdout
    assert [x.split(":")[0] for x in done.stderr.splitlines()] == ["resuming", "note"], done.stderr
    ids = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert len(ids) == 24 == len(set(ids))
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["n"] == 24 and "stopped" not in summary


def test_a_stop_a_library_wrapped_in_its_own_error_is_still_the_stop():
    """vLLM's import builds pydantic schemas; a SIGTERM arriving then comes out as pydantic's SchemaError.
    `stop_behind` finds the stop behind such an error, so the command still ends as stopped (exit 143)."""
    from adaptrubric_local.stopping import Stopped, stop_behind, stop_on_signals

    class SchemaError(Exception):
        pass

    assert stop_behind(SchemaError("no signal came")) is None
    with stop_on_signals():
        try:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)
            except Stopped as stop:  # what a library does with an exception raised inside it
                raise SchemaError("Error building 'nullable' validator: Stopped: 15") from stop
        except SchemaError as wrapped:
            behind = stop_behind(wrapped)
    assert isinstance(behind, Stopped) and behind.exit_code == 143
    assert stop_behind(SchemaError("after the block")) is None
