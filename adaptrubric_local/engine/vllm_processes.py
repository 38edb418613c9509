"""Starting and stopping a `vllm.LLM` and its processes: its engine core (`VLLM::EngineCore`, spawned
by this process) and the engine core's workers (`VLLM::Worker`). `start_llm` notes which processes
the start added; `stop_llm` stops them as vLLM does (its engine-core client's `shutdown`), then kills
whichever is still alive (a worker whose engine core died first is in no tree of this process). A
start that fails, is interrupted, or is stopped during its handshake (`stopping.rescue_stop`) kills
what it had started, so a stopped command leaves no engine holding the GPU. Knows nothing about
configs, requests or generation (vllm_config.py, vllm_engine.py).
"""
from __future__ import annotations

import contextlib
import os
import time

from ..stopping import rescue_stop

LEFTOVER_GRACE_S = 5.0  # how long SIGKILLed leftovers get to end


def _descendants() -> set:
    """This process's descendants now (psutil.Process objects, which tell a reused pid apart)."""
    import psutil

    try:
        return set(psutil.Process().children(recursive=True))
    except psutil.Error:
        return set()


def start_llm(kwargs: dict):
    """(a `vllm.LLM(**kwargs)`, the processes its start added under this one). A start that fails or is
    interrupted leaves none of them behind; a failed engine-core start says what a script needs."""
    from vllm import LLM

    # a forked engine core inherits whatever this process set up (OpenMP and tokenizer thread pools, CUDA) and
    # can hang on it; a spawned one starts clean (which is why the caller's script needs a __main__ guard)
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    before = _descendants()
    try:
        with rescue_stop(lambda: kill_leftovers(p for p in _descendants() - before if not _resource_tracker(p))):
            llm = LLM(**kwargs)
    except BaseException as exc:
        kill_leftovers(_descendants() - before)
        if isinstance(exc, RuntimeError) and "initialization failed" in str(exc).lower():
            raise RuntimeError(f"{exc} (vLLM starts its engine in a child process: a script that builds the vLLM "
                               "engine must run under `if __name__ == \"__main__\":`; see the log above for the "
                               "cause)") from exc
        raise
    return llm, sorted(_descendants() - before, key=lambda p: p.pid)


def stop_llm(llm, processes=()) -> None:
    """Stop `llm`'s engine core and workers: vLLM's shutdown, then `kill_leftovers(processes)`."""
    client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    try:
        if client is not None:
            client.shutdown()
    except Exception:  # already gone, or its sockets are: the leftovers are killed below
        pass
    finally:  # a stop during the shutdown too
        kill_leftovers(processes)


def kill_leftovers(processes, grace: float = LEFTOVER_GRACE_S) -> list[int]:
    """SIGKILL to each of `processes` still running (vLLM's shutdown has had its SIGTERM and its wait),
    then up to `grace` s for them to end; exited children are reaped. Returns the pids killed."""
    import multiprocessing

    import psutil

    alive = [p for p in processes if _running(p)]
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()  # psutil checks the pid is still this process (not a reused one)
    end = time.monotonic() + grace
    while any(_running(p) for p in alive) and time.monotonic() < end:
        time.sleep(0.05)
    multiprocessing.active_children()  # reap the engine core multiprocessing started (no zombie left behind)
    return [p.pid for p in alive]


def _resource_tracker(p) -> bool:
    """Whether a psutil.Process is multiprocessing's resource tracker (it unlinks what the killed leave)."""
    try:
        return any("resource_tracker" in a for a in p.cmdline())
    except Exception:
        return False


def _running(p) -> bool:
    """Whether a psutil.Process is still running: a zombie has ended (an orphan's may wait long to be
    reaped, by whatever holds PID 1), so it is not waited for."""
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
