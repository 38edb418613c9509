"""Stopping a command as a user does, for the tests of stopping.py and of vLLM's processes: a run in a
session of its own (so every process it starts, orphaned or not, is found by its session id), a
signal once its output file has grown, and what is left of the session 10 s later."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest


def session(leader: int) -> list[str]:
    """The processes still running in the session `leader` started (its children keep it when orphaned)."""
    import psutil

    left = []
    for p in psutil.process_iter(["pid", "name", "status"]):
        try:
            if os.getsid(p.pid) == leader and p.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {p.info['name']}")
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass
    return left


def stop_mid_run(cmd: list[str], out, sig: int, lines_before: int = 1, group: bool = False, start_s: float = 600,
                 when=None, within: float = 10.0):
    """Run `cmd` in a session of its own; once `out` has `lines_before` more lines than now (or, with
    `when`, once `when(the run's pid)` is true), send `sig` (to the whole process group with `group`, as
    Ctrl-C in a terminal does). Its stdout is left in `out`'s folder as stdout-SIG.txt. Returns (exit code, stderr,
    the processes of the run still there `within` s after the signal, those there when it was sent),
    each process as "pid name"; an exit code None: the run was still there then."""
    have = out.read_text().count("\n") if out.exists() else 0
    err = out.with_name(f"stderr-{sig}.txt")
    with open(err, "wb") as fh, open(out.with_name(f"stdout-{sig}.txt"), "wb") as stdout:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=fh, start_new_session=True)
        end = time.monotonic() + start_s
        while time.monotonic() < end and proc.poll() is None:
            if when(proc.pid) if when else out.exists() and out.read_text().count("\n") >= have + lines_before:
                seen = session(proc.pid)
                (os.killpg if group else os.kill)(proc.pid, sig)
                break
            time.sleep(0.02)
        else:
            proc.kill()
            pytest.fail(f"the run ended or stalled before the moment to stop it: {err.read_text()[-3000:]}")
        t0 = time.monotonic()
        try:
            code = proc.wait(within)
        except subprocess.TimeoutExpired:
            code = None
        while session(proc.pid) and time.monotonic() < t0 + within:
            time.sleep(0.2)
        left = session(proc.pid)
        if code is None or left:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return code, err.read_text(), left, seen
