"""Whether the cascade's judge is answering: while judge calls are in flight its endpoint is probed
every `check_every` seconds (a cheap request that a live server answers at once, however long its
generations take); a probe that fails or does not answer within `probe_timeout` marks the judge down.
Then the `on_down` callback runs once (the scorer cuts the calls in flight off, so their lines keep the
student's verdicts at once instead of after the judge timeout), `notify` says so, and the judge is
probed again every `retry_every` seconds until it answers (`on_up`, `notify` again). While it is
down, `down` holds the reason and the scorer sends it nothing.

A judge run in this process (`--judge-model`) has no endpoint to probe and is never marked down.
Knows nothing about verdicts, files or HTTP (the probe is a callable).
"""
from __future__ import annotations

import threading
from collections.abc import Callable

CHECK_EVERY = 5.0  # seconds between probes while judge calls are in flight
RETRY_EVERY = 30.0  # seconds between probes of a judge that stopped answering
PROBE_TIMEOUT = 5.0


class JudgeHealth:
    """A watcher thread over a judge's endpoint (start with `start()`, end with `stop()`)."""

    def __init__(self, probe: Callable[[float], None], notify: Callable[[str], None], what: str = "the judge",
                 on_down: Callable[[], None] = lambda: None, on_up: Callable[[], None] = lambda: None,
                 check_every: float = CHECK_EVERY, retry_every: float = RETRY_EVERY,
                 probe_timeout: float = PROBE_TIMEOUT, then: str = ""):
        self.probe, self.notify, self.what, self.then = probe, notify, what, then
        self.on_down, self.on_up = on_down, on_up
        self.check_every, self.retry_every, self.probe_timeout = check_every, retry_every, probe_timeout
        self.down: str | None = None  # why the judge is taken to be down; None while it answers
        self.busy = 0  # judge calls in flight
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="judge-health", daemon=True)

    def start(self) -> JudgeHealth:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()

    def calling(self, delta: int) -> None:
        """A judge call begins (+1) or ends (-1)."""
        with self.lock:
            self.busy += delta

    def _watch(self) -> None:
        while not self.stopping.wait(self.retry_every if self.down else self.check_every):
            if self.down is None and not self.busy:
                continue
            why = None  # while the probe answers
            try:
                self.probe(self.probe_timeout)
            except Exception as exc:  # a timeout, a refused connection, a reply that is not the endpoint's
                why = f"{type(exc).__name__}: {' '.join(str(exc).split()) or 'no answer'}"
            if self.stopping.is_set():
                return
            if why and self.down is None:
                self.down = why
                self.on_down()
                self.notify(f"{self.what} is not answering ({why}): the student's verdicts stand for the lines "
                            f"sent to it (judge_error), and scoring goes on without it; it is asked again every "
                            f"{self.retry_every:g} s{self.then}")
            elif not why and self.down is not None:
                self.down = None
                self.on_up()
                self.notify(f"{self.what} answers again: the lines the band sends go to it again")
