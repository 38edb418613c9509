"""Dynamic batching of reward calls: one scoring thread fed by a queue gathers whatever arrives within a
short window into one batch, so concurrent callers (verl's reward threads, OpenRLHF's rollout threads,
the service's requests) share engine batches; each distinct trajectory of a batch is scored once.
Thread-safe; futures out. Knows nothing about models, pipelines or HTTP.
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from ..types import Trajectory, Verdict
from .inputs import traj_key


class QueueFull(RuntimeError):
    """The batcher holds `max_pending` trajectories already."""


class Batcher:
    """One scoring thread fed by a queue: whatever arrives within `window_s` of the first waiting item
    (up to `max_batch`) is scored as one batch, each distinct trajectory once. Thread-safe; futures out."""

    def __init__(self, score: Callable[[list[Trajectory]], list[Verdict]], max_batch: int = 32,
                 window_s: float = 0.02, max_pending: int | None = None):
        self._score = score
        self.max_batch, self.window_s, self.max_pending = max_batch, window_s, max_pending
        self._q: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self.pending = 0
        self.batches: list[int] = []  # size of every batch run (for tests and benchmarks)
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="adaptrubric-batcher", daemon=True)
        self._thread.start()

    def submit(self, trajs: Sequence[Trajectory]) -> list[Future]:
        """Queue trajectories; one future per trajectory, resolved with its Verdict."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the scorer is shut down")
            if self.max_pending is not None and self.pending + len(trajs) > self.max_pending:
                raise QueueFull(f"{self.pending} trajectories already waiting (limit {self.max_pending})")
            self.pending += len(trajs)
        futs = [Future() for _ in trajs]
        for t, f in zip(trajs, futs):
            self._q.put((t, f))
        return futs

    def _loop(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            batch = [item]
            deadline = time.monotonic() + self.window_s
            while len(batch) < self.max_batch:
                try:
                    nxt = self._q.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if nxt is None:
                    self._q.put(None)  # finish this batch, then stop
                    break
                batch.append(nxt)
            self._run(batch)

    def _run(self, batch: list[tuple[Trajectory, Future]]) -> None:
        groups: dict[str, tuple[Trajectory, list[Future]]] = {}  # each distinct trajectory, its callers
        for t, f in batch:
            groups.setdefault(traj_key(t), (t, []))[1].append(f)
        self.batches.append(len(groups))
        try:
            verdicts = self._score([t for t, _ in groups.values()])
            for (_, futs), v in zip(groups.values(), verdicts):
                for f in futs:
                    f.set_result(dataclasses.replace(v))
        except BaseException as exc:  # the engine failed for the whole batch: every caller hears why
            for _, futs in groups.values():
                for f in futs:
                    if not f.done():
                        f.set_exception(exc)
        finally:
            with self._lock:
                self.pending -= len(batch)

    def close(self, timeout: float | None = None) -> None:
        """Finish everything queued, then stop the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._q.put(None)
        self._thread.join(timeout)
