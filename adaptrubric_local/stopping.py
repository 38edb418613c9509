"""Stopping a command on SIGTERM or SIGINT (Ctrl-C) the way an exception stops it: `stop_on_signals`
turns either signal into `Stopped` in the main thread, so every `finally` and `with` on the way out
runs (engines close, and with them vLLM's engine core and workers; a verdict file gets its summary)
instead of the process dying where it stands and leaving its children behind.

`Stopped` is a KeyboardInterrupt, so code that already lets Ctrl-C through lets it through too, and
carries the signal's name and the conventional exit code (128 + the signal's number: 130, 143).
What was done before the stop is said by whoever catches it (`note`, set on the way out).

A library may swallow the exception a handler raises (pyzmq's poll retries after an interrupted
call, as in vLLM's start-up handshake), so a stop cannot rest on it alone: a command still inside
the block `STOP_GRACE_S` after the signal, or given a second one, ends at once: its child processes
killed, the same exit code, one line saying so. Knows nothing about engines, verdict files or the
command line.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator, Optional

SIGNALS = (signal.SIGTERM, signal.SIGINT)
STOP_GRACE_S = 20.0  # a stopped command's clean-up gets this long (vLLM's shutdown takes up to about 10 s)


class Stopped(KeyboardInterrupt):
    """A command stopped by a signal (`signum`); `note`: what it had done, for the one line it prints."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.note: Optional[str] = None

    @property
    def name(self) -> str:
        """The signal's name: SIGTERM, SIGINT."""
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, the shell's convention (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + int(self.signum)


def stop_reason(exc: BaseException) -> str:
    """What stopped a run, for its summary: the signal's name (a bare KeyboardInterrupt is Ctrl-C),
    else the exception's type and message."""
    if isinstance(exc, Stopped):
        return exc.name
    if isinstance(exc, KeyboardInterrupt):
        return "SIGINT"
    return f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def stop_on_signals(grace: float = STOP_GRACE_S) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise `Stopped` in the main thread; a second signal, or a
    block not left `grace` s after the first, ends the process at once (`end_now`). The previous
    handlers are back after it. Outside the main thread it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    left = threading.Event()
    state = {"raised": False}

    def handler(signum, frame):
        if state["raised"]:
            end_now(signum, "a second signal")
        state["raised"] = True
        threading.Thread(target=lambda: left.wait(grace) or end_now(signum, f"still stopping after {grace:.0f} s"),
                         daemon=True, name="stop-grace").start()
        raise Stopped(signum)

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        left.set()
        for s, old in previous.items():
            signal.signal(s, old if old is not None else signal.SIG_DFL)


def end_now(signum: int, why: str) -> None:
    """End this process now: SIGKILL to its child processes (their own children first), one line on
    stderr, exit code 128 + `signum`."""
    import os
    import sys

    try:
        import psutil

        for p in reversed(psutil.Process().children(recursive=True)):
            try:
                p.kill()
            except psutil.Error:
                pass
    except Exception:  # no psutil, or the process table unreadable: exit all the same
        pass
    try:
        print(f"adaptrubric: stopped by {signal.Signals(signum).name} ({why}: ended at once, its child processes "
              "killed)", file=sys.stderr, flush=True)
    finally:
        os._exit(128 + int(signum))
