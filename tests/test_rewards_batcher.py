"""Dynamic batching (batcher.py): concurrent calls within the window share one batch, a trajectory
submitted twice is scored once, a full queue refuses more, and an engine failure reaches every caller."""
import threading
import time

import pytest

from adaptrubric_local import load_trajectories
from adaptrubric_local.rewards.batcher import Batcher, QueueFull
from adaptrubric_local.types import Verdict


@pytest.fixture
def trajs(synth_set):
    return load_trajectories(synth_set).trajectories[:6]


def _echo(calls):
    def score(ts):
        calls.append([t.id for t in ts])
        return [Verdict(id=t.id, score=1) for t in ts]
    return score


def test_calls_within_the_window_share_a_batch_and_repeats_are_scored_once(trajs):
    calls = []
    b = Batcher(_echo(calls), max_batch=32, window_s=0.3)
    futs = []
    threads = [threading.Thread(target=lambda t=t: futs.extend(b.submit([t]))) for t in trajs[:4] + trajs[:2]]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    got = sorted(f.result(timeout=10).id for f in futs)
    b.close()
    assert got == sorted([t.id for t in trajs[:4]] + [t.id for t in trajs[:2]])
    assert len(calls) == 1 and sorted(calls[0]) == sorted(t.id for t in trajs[:4])  # one batch, each once
    assert b.batches == [4]


def test_max_batch_and_a_full_queue(trajs):
    calls = []
    gate = threading.Event()

    def slow(ts):
        gate.wait(10)
        return _echo(calls)(ts)

    b = Batcher(slow, max_batch=2, window_s=0.05, max_pending=4)
    futs = b.submit(trajs[:4])
    with pytest.raises(QueueFull, match="4 trajectories already waiting"):
        b.submit(trajs[4:5])
    gate.set()
    assert [f.result(timeout=10).id for f in futs] == [t.id for t in trajs[:4]]
    time.sleep(0.05)
    assert all(len(c) <= 2 for c in calls) and b.pending == 0
    b.close()
    with pytest.raises(RuntimeError, match="shut down"):
        b.submit(trajs[:1])


def test_an_engine_failure_reaches_every_caller(trajs):
    def broken(ts):
        raise RuntimeError("CUDA error: device lost")

    b = Batcher(broken, window_s=0.05)
    futs = b.submit(trajs[:3])
    for f in futs:
        with pytest.raises(RuntimeError, match="device lost"):
            f.result(timeout=10)
    b.close()
