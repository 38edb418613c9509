"""Stopping a command on SIGTERM or SIGINT (Ctrl-C) the way an exception stops it: `stop_on_signals`
turns either signal into `Stopped` in the main thread, so every `finally` and `with` on the way out
runs (engines close, and with them vLLM's engine core and workers; a verdict file gets its summary)
instead of the process dying where it stands and leaving its children behind.

`Stopped` is a KeyboardInterrupt, so code that already lets Ctrl-C through lets it through too, and
carries the signal's name and the conventional exit code (128 + the signal's number: 130, 143). A
signal that arrives while the command is stopping is ignored, so a second Ctrl-C cannot cut the
clean-up short (it is bounded: vLLM's shutdown timeout, then its leftovers are killed). What was
done before the stop is said by whoever catches it (`note`, set on the way out). Knows nothing about
engines, verdict files or the command line.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator, Optional

SIGNALS = (signal.SIGTERM, signal.SIGINT)


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
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise `Stopped` in the main thread (once; later ones are
    ignored); the previous handlers are back after it. Outside the main thread it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    state = {"raised": False}

    def handler(signum, frame):
        if state["raised"]:
            return  # already stopping: let the clean-up finish
        state["raised"] = True
        raise Stopped(signum)

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old if old is not None else signal.SIG_DFL)
