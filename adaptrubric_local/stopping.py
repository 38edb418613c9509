"""Stopping a command on SIGTERM or SIGINT (Ctrl-C) the way an exception stops it: `stop_on_signals`
turns either signal into `Stopped` (a KeyboardInterrupt carrying the signal's name and exit code) in the
main thread, so every `finally` and `with` on the way out runs (engines close, and with them vLLM's
engine core and workers) instead of the process dying and leaving its children behind.

A library may swallow the exception a handler raises (pyzmq's poll, in vLLM's start-up handshake):
`rescue_stop` marks such a call. As a last resort a command still stopping `STOP_GRACE_S` after the
signal, or given a second one, ends at once (`end_now`). Knows nothing about engines, verdict files or
the command line.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

SIGNALS = (signal.SIGTERM, signal.SIGINT)
STOP_GRACE_S = 8.0  # a stopped command's clean-up gets this long: every process of it is gone within 10 s
REDELIVER_S = 0.5  # inside `rescue_stop`, how often a stop is delivered again until it gets through


class Stopped(KeyboardInterrupt):
    """A command stopped by a signal (`signum`); `note`: what it had done, for the one line it prints."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.note: str | None = None

    @property
    def name(self) -> str:
        """The signal's name: SIGTERM, SIGINT."""
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, the shell's convention (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + int(self.signum)


def stop_behind(exc: BaseException) -> Stopped | None:
    """The `Stopped` behind `exc`: itself, or the stop the signal handler raised in the innermost
    `stop_on_signals` block when a library wrapped it in an error of its own (pydantic building a schema
    while vLLM imports turns it into a SchemaError); None when no signal came."""
    if isinstance(exc, Stopped):
        return exc
    return _active.stop if _active is not None else None


def stop_reason(exc: BaseException) -> str:
    """What stopped a run, for its summary: the signal's name (a bare KeyboardInterrupt is Ctrl-C),
    else the exception's type and message."""
    if isinstance(exc, Stopped):
        return exc.name
    if isinstance(exc, KeyboardInterrupt):
        return "SIGINT"
    return f"{type(exc).__name__}: {exc}"


@dataclass
class _Stopping:
    """The state of the innermost `stop_on_signals` block (main thread only)."""

    stop: Stopped | None = None  # the first signal's exception, once there is one
    rescue: tuple | None = None  # (on_stop, the Event set when the `rescue_stop` block is left) inside one
    redeliver: int = 0  # a signal this module sent the main thread again, not yet handled


_active: _Stopping | None = None


@contextlib.contextmanager
def stop_on_signals(grace: float = STOP_GRACE_S) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise `Stopped` in the main thread; a second signal, or a
    block not left `grace` s after the first, ends the process at once (`end_now`). The previous
    handlers are back after it. Outside the main thread it changes nothing."""
    global _active
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    left = threading.Event()
    state = _Stopping()

    def handler(signum, frame):
        if state.stop is not None:
            if state.redeliver:  # sent again by `rescue_stop`: raised again while its block runs, else nothing
                state.redeliver -= 1
                if state.rescue is not None:
                    raise state.stop
                return
            end_now(signum, "a second signal")
        state.stop = Stopped(signum)
        threading.Thread(target=lambda: left.wait(grace) or end_now(signum, f"still stopping after {grace:.0f} s"),
                         daemon=True, name="stop-grace").start()
        if state.rescue is not None:
            threading.Thread(target=_rescue, args=(state, signum, *state.rescue), daemon=True,
                             name="stop-rescue").start()
        raise state.stop

    outer, _active = _active, state
    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        left.set()
        _active = outer
        for s, old in previous.items():
            signal.signal(s, old if old is not None else signal.SIG_DFL)


@contextlib.contextmanager
def rescue_stop(on_stop: Callable[[], object]) -> Iterator[None]:
    """Around a call into a library that may swallow `Stopped` (vLLM's start): a stop inside the block
    runs `on_stop` in a thread (end what the call waits on), is delivered again every `REDELIVER_S` s
    until the block is left, and the block's exit raises it (from whatever the call raised instead).
    Outside `stop_on_signals`, or outside the main thread, it changes nothing."""
    state = _active
    if state is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    before, outer = state.stop, state.rescue
    done = threading.Event()
    state.rescue = (on_stop, done)
    try:
        yield
    except BaseException as exc:
        if state.stop is not before and exc is not state.stop:
            raise state.stop from exc
        raise
    finally:
        state.rescue = outer
        done.set()
    if state.stop is not before:  # the library swallowed it and went on
        raise state.stop


def _rescue(state: _Stopping, signum: int, on_stop: Callable[[], object], done: threading.Event) -> None:
    """`rescue_stop`'s thread: `on_stop`, then the signal again to the main thread until `done`."""
    with contextlib.suppress(Exception):  # what it ends may be gone already
        on_stop()
    main = threading.main_thread().ident
    while not done.wait(REDELIVER_S):
        if not state.redeliver:  # one at a time: signals sent together arrive as one
            state.redeliver = 1
            signal.pthread_kill(main, signum)


def end_now(signum: int, why: str) -> None:
    """End this process now: SIGKILL to its child processes (their own children first), one line on
    stderr, exit code 128 + `signum`."""
    import os
    import sys

    with contextlib.suppress(Exception):  # no psutil, or the process table unreadable: exit all the same
        import psutil

        for p in reversed(psutil.Process().children(recursive=True)):
            with contextlib.suppress(psutil.Error):
                p.kill()
    try:
        print(f"adaptrubric: stopped by {signal.Signals(signum).name} ({why}: ended at once, its child processes "
              "killed)", file=sys.stderr, flush=True)
    finally:
        os._exit(128 + int(signum))
