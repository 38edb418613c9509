"""Scoring a data set on Ray (`score --ray`): N replicas, each a Ray actor holding one engine and one
pipeline built by the package's own engine builder, fed chunks of trajectories by the driver, which
is the only writer of the verdict file (`scoring.score_with`). The same code runs on a laptop's local
Ray (started on demand) and on a cluster (`ray_address`). Why actors and not Ray Data: docs/scoring.md.

Exactly once: actor calls run at most once (`max_task_retries=0`) and a chunk's verdicts reach the driver
only as the return value of one call, so a replica killed mid-chunk returns nothing of it; the chunk is
sent again (to the same replica once Ray has restarted it, `max_restarts`, or to another), and after
`max_attempts` deaths its ids get error verdicts, which `--resume` retries. Resume reads `--out` and sends
only the ids it lacks (a torn last line is cut off, as in-process). A chunk holds whole instruction
groups, so each replica's route/cue cache serves a group as one process would. Plain `ray` only.

Chunks are at most the pipeline's `batch_size`, about 4 per replica; the driver takes the trajectories
from `score_with`'s stream a window at a time (4 chunks per replica), so it holds a few chunks, not the
data set. Verdict lines arrive in completion order; readers take the last line per id.

No id reaches the driver twice: (1) a chunk is sent again only after `ray.get` of its call raised
RayActorError, and an object ref that holds an error never holds a result; (2) `score` is never retried
(only the verdict-less `ready` is); (3) a chunk is in `busy` for one replica at a time and put back once
per death; (4) the loader makes a repeated id of the data an error; (5) a failed chunk's error lines are
written for ids not yet written. The `seen` check stays as a guard (tested with a result that repeats an id).

What it does not know or do: replicas read screenshots by the paths the driver loaded, so on several
machines the data must be on a shared file system or at the same path on every node. The package
and the model must be installed (or cached) on every node. Replicas hold the transformers engine
(`score_ray` builds the settings record from `HFEngineConfig`); a remote OpenAI-compatible engine
needs no replicas. Knows nothing about argument parsing.
"""
from __future__ import annotations

import math
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from ..bank import load_bank
from ..formats import LoadResult
from ..pipeline import PipelineConfig
from ..prompts import load_prompts
from ..run_settings import run_settings
from ..scoring import score_with
from ..types import Trajectory, Verdict

INSTALL_HINT = "Ray is not installed: pip install 'adaptrubric-local[ray]'"


class ReplicasGone(RuntimeError):
    """No replica is left to score with; what was written is kept."""


@dataclass
class RayConfig:
    """Where the replicas run and what each one gets."""

    ray_address: str | None = field(default=None, metadata={
        "help": "an existing Ray cluster: auto, HOST:6379 or ray://HOST:10001",
        "none": "$RAY_ADDRESS if set, else a local Ray started for this run"})
    replicas: int = field(default=1, metadata={"help": "Ray actors, one engine (model copy) each"})
    gpus_per_replica: float | None = field(default=None, metadata={
        "help": "GPUs per replica (fractions share a GPU)", "none": "1 when the cluster has GPUs, else 0"})
    cpus_per_replica: float = field(default=1.0, metadata={
        "help": "CPUs Ray reserves per replica (also its torch threads on the CPU)"})
    max_restarts: int = field(default=3, metadata={"help": "times Ray restarts a replica whose process died"})
    max_attempts: int = field(default=3, metadata={
        "help": "times a chunk is sent again after its replica died; then its ids get error verdicts"})

    def __post_init__(self):
        if self.replicas < 1:
            raise ValueError(f"replicas must be >= 1, got {self.replicas}")
        if self.gpus_per_replica is not None and self.gpus_per_replica < 0:
            raise ValueError(f"gpus_per_replica must be >= 0, got {self.gpus_per_replica}")
        if self.cpus_per_replica <= 0:
            raise ValueError(f"cpus_per_replica must be > 0, got {self.cpus_per_replica}")
        if self.max_restarts < 0 or self.max_attempts < 1:
            raise ValueError("max_restarts must be >= 0 and max_attempts >= 1")


def chunks(trajs: list[Trajectory], size: int) -> list[list[Trajectory]]:
    """Trajectories packed into chunks of at most `size`, in first-appearance order, never splitting
    the trajectories of one instruction (a group larger than `size` is one chunk)."""
    groups: dict[str, list[Trajectory]] = {}
    for t in trajs:
        groups.setdefault(t.instruction, []).append(t)
    out: list[list[Trajectory]] = []
    for group in groups.values():
        if out and len(out[-1]) + len(group) <= size:
            out[-1].extend(group)
        else:
            out.append(list(group))
    return out


def windowed_chunks(first: list[Trajectory], rest: Iterator[Trajectory], window: int, size: int
                    ) -> Iterator[_Chunk]:
    """`chunks` of `first`, then of each next `window` trajectories of `rest`, read as they are asked
    for: an instruction's group stays whole within a window (one that a window's end cuts is sent as
    two groups: its router and cue calls may be made twice, once per replica)."""
    part = first
    while part:
        yield from (_Chunk(c) for c in chunks(part, size))
        part = list(islice(rest, window))


def chunk_size(n: int, replicas: int, batch_size: int) -> int:
    """About 4 chunks per replica, at most one pipeline batch each."""
    return max(1, min(batch_size, math.ceil(n / (4 * replicas))))


class Replica:
    """One engine and one pipeline in a Ray actor process."""

    def __init__(self, pipeline: PipelineConfig, engine_options: dict):
        from ..engine.build import build_engine
        from ..pipeline import AdaptRubric

        self.engine = build_engine(**engine_options)
        self.pipe = AdaptRubric(self.engine, pipeline)

    def ready(self) -> int:
        """The replica's process id, once its engine is loaded."""
        return os.getpid()

    def score(self, trajs: list[Trajectory]) -> dict:
        """Verdicts for one chunk, with what the pipeline counted while scoring it."""
        before = self.pipe.summary()
        verdicts = self.pipe.score(trajs)
        after = self.pipe.summary()
        return {"pid": os.getpid(), "verdicts": verdicts, "engine": after.get("engine"),
                **{k: after[k] - before[k] for k in ("route_unparsed", "cue_unparsed")}}


@dataclass
class _Chunk:
    trajs: list[Trajectory]
    attempts: int = 0


class ReplicaPool:
    """The driver's side: starts the replicas on first use, sends each one chunk at a time, yields
    their verdicts (each id once), resends a dead replica's chunk, and stops what it started.
    `on_chunk(pool)` is called after each chunk's verdicts are handed on and the replica that
    returned them has its next chunk (`pool.busy`: replica -> chunk in flight; `pool.pids`)."""

    def __init__(self, pipeline: PipelineConfig, engine_options: dict, config: RayConfig, *,
                 stamp: dict | None = None, on_chunk: Callable[[ReplicaPool], None] | None = None):
        self.pipeline, self.engine_options, self.config = pipeline, engine_options, config
        self.stamp = stamp or {}
        self.on_chunk = on_chunk
        self.actors: list = []
        self.pids: dict[int, int] = {}
        self.busy: dict[int, _Chunk] = {}
        self.unparsed = {"route_unparsed": 0, "cue_unparsed": 0}
        self.counts = {"chunks": 0, "replica_deaths": 0, "resent_chunks": 0, "failed_chunks": 0}
        self.engine_stats: dict[int, dict] = {}
        self.gpus: float | None = None
        self._started_ray = False
        self._last_error: Exception | None = None

    # ------------------------------------------------------------------ what score_with reads
    def summary(self) -> dict:
        """Unparsed router/cue answers so far, and how the run went (`runtime`: chunks, replica deaths,
        chunks sent again, engine counters per replica process)."""
        run = {**self.runtime(), **self.counts}
        if self.engine_stats:
            run["engine_per_replica"] = [self.engine_stats[p] for p in sorted(self.engine_stats)]
        return {**self.unparsed, "runtime": run}

    def runtime(self) -> dict:
        """How the run is executed (recorded under `runtime`, never a verdict-deciding setting)."""
        c = self.config
        gpus = self.gpus if self.gpus is not None else c.gpus_per_replica
        return {"mode": "ray", "address": c.ray_address, "replicas": c.replicas, "gpus_per_replica": gpus,
                "cpus_per_replica": c.cpus_per_replica}

    def iter_score(self, trajs: Iterable[Trajectory]) -> Iterator[Verdict]:
        """One verdict per trajectory, in completion order."""
        for ready in self.iter_ready(trajs):
            yield from ready

    def iter_ready(self, trajs: Iterable[Trajectory]) -> Iterator[list[Verdict]]:
        """The verdicts as they arrive, taking the trajectories from `trajs` (a stream: `score_with`'s)
        a window at a time as replicas ask for chunks (`windowed_chunks`), so the driver holds a few
        chunks, not the data set."""
        it = iter(trajs)
        window = 4 * self.config.replicas * self.pipeline.trajectories_per_batch
        first = list(islice(it, window))
        if not first:
            return
        size = chunk_size(len(first), self.config.replicas, self.pipeline.trajectories_per_batch)
        self._start()
        try:
            for v in self._run(deque(), windowed_chunks(first, it, window, size)):
                yield [v]
        finally:
            self.close()

    # ------------------------------------------------------------------ Ray
    def _start(self) -> None:
        try:
            import ray
        except ImportError:
            raise ImportError(INSTALL_HINT) from None
        if not ray.is_initialized():
            ray.init(address=self.config.ray_address)
            self._started_ray = True
        c, have = self.config, ray.cluster_resources()
        gpu, cpu = have.get("GPU", 0), have.get("CPU", 0)
        self.gpus = c.gpus_per_replica if c.gpus_per_replica is not None else (1.0 if gpu >= 1 else 0.0)
        want_gpu, want_cpu = self.gpus * c.replicas, c.cpus_per_replica * c.replicas
        if want_gpu > gpu or want_cpu > cpu:
            print(f"warning: {c.replicas} replica(s) ask for {want_gpu:g} GPU(s) and {want_cpu:g} CPU(s); the cluster "
                  f"has {gpu:g} and {cpu:g} now: the rest wait until resources free up (or the autoscaler adds nodes)",
                  file=sys.stderr)
        remote = ray.remote(Replica).options(num_cpus=c.cpus_per_replica, num_gpus=self.gpus,
                                             max_restarts=c.max_restarts, max_task_retries=0)
        self.actors = [remote.remote(self.pipeline, self.engine_options) for _ in range(c.replicas)]

    def close(self) -> None:
        """Stop the replicas, and Ray if this pool started it."""
        import ray

        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    def _run(self, pending: deque[_Chunk], source: Iterator[_Chunk]) -> Iterator[Verdict]:
        """Send chunks (those sent again first, then the next of `source`) to idle replicas until both
        run out and no chunk is in flight."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        seen: set[str] = set()
        calls: dict = {a.ready.remote(): (r, None) for r, a in enumerate(self.actors)}  # ref -> (replica, chunk)
        idle: list[int] = []
        more = [True]  # whether `source` may hold more chunks

        def dispatch() -> None:
            while idle and (pending or more[0]):
                chunk = pending.popleft() if pending else next(source, None)
                if chunk is None:
                    more[0] = False
                    break
                r = idle.pop(0)
                self.busy[r] = chunk
                calls[self.actors[r].score.remote(chunk.trajs)] = (r, chunk)

        while True:
            dispatch()
            if not (pending or self.busy or more[0]):
                break
            if not calls:
                raise ReplicasGone("no Ray replica is left (it could not start, or its restarts are used up); the "
                                   f"verdicts written so far are kept: rerun with --resume. Last error:\n"
                                   f"{self._last_error}")
            (ref,), _ = ray.wait(list(calls), num_returns=1)
            r, chunk = calls.pop(ref)
            if chunk is not None:
                del self.busy[r]
            try:
                result = ray.get(ref)
            except RayActorError as exc:
                self._last_error = exc
                if chunk is None:  # never started (its engine raised), or its restarts are used up: gone
                    print(f"warning: Ray replica {r} is gone: {_last_line(exc)}", file=sys.stderr)
                    continue
                yield from self._died(r, chunk, exc, pending, seen)
                calls[self.actors[r].ready.options(max_task_retries=-1).remote()] = (r, None)  # back once restarted
                continue
            except RayTaskError as exc:  # the pipeline raised on the whole chunk: its ids get error lines
                self.counts["failed_chunks"] += 1
                yield from self._errors(chunk.trajs if chunk else [], f"replica {r} failed: {_last_line(exc)}", seen)
                idle.append(r)
                continue
            idle.append(r)
            if chunk is None:
                self.pids[r] = result
                continue
            yield from self._take(r, result, seen)
            if self.on_chunk is not None:
                dispatch()
                self.on_chunk(self)

    def _take(self, r: int, result: dict, seen: set[str]) -> Iterator[Verdict]:
        self.pids[r] = result["pid"]
        self.counts["chunks"] += 1
        for k in self.unparsed:
            self.unparsed[k] += result[k]
        if result.get("engine"):
            self.engine_stats[result["pid"]] = result["engine"]
        for v in result["verdicts"]:
            if str(v.id) not in seen:
                seen.add(str(v.id))
                yield v

    def _died(self, r: int, chunk: _Chunk, exc: Exception, pending: deque, seen: set[str]) -> Iterator[Verdict]:
        self.counts["replica_deaths"] += 1
        chunk.attempts += 1
        if chunk.attempts < self.config.max_attempts:
            self.counts["resent_chunks"] += 1
            print(f"replica {r} died while scoring {len(chunk.trajs)} trajectories; Ray restarts it and the chunk "
                  f"is sent again (attempt {chunk.attempts + 1} of {self.config.max_attempts})", file=sys.stderr)
            pending.appendleft(chunk)
            return
        self.counts["failed_chunks"] += 1
        yield from self._errors(chunk.trajs, f"the replica scoring this chunk died {chunk.attempts} times "
                                             f"({type(exc).__name__}); rerun with --resume to retry", seen)

    def _errors(self, trajs: list[Trajectory], why: str, seen: set[str]) -> Iterator[Verdict]:
        for t in trajs:
            if t.id not in seen:
                seen.add(t.id)
                yield Verdict(id=t.id, status="error", error=f"{t.source or '?'}, record {t.id}: {why}",
                              label=t.label, platform=t.platform, task_id=t.task_id, **self.stamp)


def _last_line(exc: Exception) -> str:
    lines = [x for x in str(exc).strip().splitlines() if x.strip()]
    return lines[-1].strip() if lines else type(exc).__name__


def score_ray(data: str | Path, out: str | Path, pipeline: PipelineConfig, engine_options: dict, config: RayConfig,
              *, loaded: LoadResult | None = None, resume: bool = False, fmt: str = "auto", progress: bool = True,
              retry_errors: bool = True, force_settings: bool = False, calibration: str | Path | None = None,
              on_chunk: Callable[[ReplicaPool], None] | None = None) -> dict:
    """Score `data` into `out` on Ray with `config.replicas` replicas; returns the summary (as
    `scoring.score_file`). `engine_options` are `engine.build.build_engine`'s keyword arguments
    (`model`, HFEngineConfig fields). The settings record is the in-process one: a file begun
    in-process resumes on Ray and back without --force-settings."""
    from ..engine.hf_config import HFEngineConfig

    engine_config = HFEngineConfig(**engine_options)  # fail on bad options before Ray starts
    settings = run_settings(pipeline, engine_config, bank_sha=load_bank(pipeline.bank_path).sha,
                            prompts_sha=load_prompts().sha)
    pool = ReplicaPool(pipeline, engine_options, config, on_chunk=on_chunk,
                       stamp={"model": settings["model"], "bank_sha": settings["bank_sha"]})
    t0 = time.perf_counter()
    summary = score_with(pool, {**settings, "runtime": pool.runtime()}, data, out, resume=resume, fmt=fmt,
                         loaded=loaded, progress=progress, retry_errors=retry_errors, force_settings=force_settings,
                         calibration=calibration, desc=f"scoring ({config.replicas} Ray replica(s))")
    summary["wall_s"] = time.perf_counter() - t0
    return summary

