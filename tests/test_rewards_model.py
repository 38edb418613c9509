"""RewardModel: loads once under concurrency, batches callers together, scores each distinct
trajectory once, counts what failed."""
import json
import threading
import time

import pytest

from adaptrubric_local import FakeEngine, load_trajectories
from adaptrubric_local.rewards.model import RewardModel


@pytest.fixture
def trajs(synth_set):
    return load_trajectories(synth_set).trajectories[:6]


def verify_calls(engine):
    return sum(r.kind == "verify" for b in engine.batches for r in b)


def test_many_threads_one_load_and_shared_batches(trajs):
    made = []

    def factory():
        time.sleep(0.2)  # a slow load widens the race window
        eng = FakeEngine()
        made.append(eng)
        return eng

    rm = RewardModel(engine_factory=factory, batch_window_ms=50)
    start = threading.Barrier(12)
    out = [None] * 12

    def worker(i):
        start.wait()
        out[i] = rm.rewards([trajs[i % len(trajs)].to_dict()])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and rm.loads == 1
    assert out == [[1.0]] * 12
    # 12 concurrent single-trajectory calls were gathered: fewer batches than calls, 6 distinct scored
    assert len(rm.batcher.batches) < 12
    assert verify_calls(made[0]) <= 12 and rm.stats["trajectories"] == 12
    rm.close()


def test_each_distinct_trajectory_scored_once_per_call(trajs):
    eng = FakeEngine()
    rm = RewardModel(engine=eng)
    a, b = trajs[0], trajs[1]
    verdicts = rm.score([a, a.to_dict(), b, json.dumps(a.to_dict())])
    assert [v.id for v in verdicts] == [a.id, a.id, b.id, a.id]
    assert verify_calls(eng) == 2
    assert verdicts[0] == verdicts[1] and verdicts[0] is not verdicts[1]  # copies, not one shared object
    rm.close()


def test_rewards_modes_and_failure_counts(trajs):
    eng = FakeEngine(p_score=lambda req, d: 0.75 if d == "1" else 0.25,
                     script=lambda r: "no verdict here" if r.kind == "verify" and "Wi-Fi" in r.prompt
                     else FakeEngine().script(r))
    rm = RewardModel(engine=eng, reward="soft")
    items = [t.to_dict() for t in trajs[:3]] + [{"id": "bad", "instruction": "x", "steps": []}]
    vals = rm.rewards(items)
    assert vals[:3] == [0.75 if "Wi-Fi" not in t.instruction else None for t in trajs[:3]]
    assert vals[3] is None
    st = rm.stats
    assert st["trajectories"] == 4 and st["errors"] == 1 and st["error_rate"] == 0.25
    assert st["unparsed"] == sum("Wi-Fi" in t.instruction for t in trajs[:3])
    assert rm.number(rm.score(items[3:])[0]) == 0.0
    rm.close()


def test_engine_failure_becomes_error_verdicts(trajs):
    class Broken(FakeEngine):
        def generate(self, requests):
            raise RuntimeError("device lost")

    rm = RewardModel(engine=Broken())
    vs = rm.score(trajs[:2])
    assert [v.status for v in vs] == ["error", "error"] and "device lost" in vs[0].error
    rm.close()


def test_an_item_that_cannot_be_read_keeps_its_id(trajs, tmp_path):
    """In process and through an unreachable service alike, a bad item's error verdict names its trajectory
    (or, for an item that names none, its place), so a trainer matching verdicts to rollouts by id can."""
    items = [trajs[0].to_dict(), {"id": "empty", "instruction": "x", "steps": []},
             {**trajs[1].to_dict(), "id": "gone", "steps": [{"screenshot": "nowhere.png", "action": "tap"}]},
             json.dumps({"id": 7, "instruction": "x"}), "{cut", {"instruction": "no id"}, '{"id": "cut-short", "ins']
    ids = [trajs[0].id, "empty", "gone", "7", "item 4", "item 5", "cut-short"]
    rm = RewardModel(engine=FakeEngine(), data_root=str(tmp_path))
    verdicts = rm.score(items)
    assert [v.id for v in verdicts] == ids
    assert [v.status for v in verdicts] == ["ok"] + ["error"] * 6
    rm.close()
    down = RewardModel(service_url="http://127.0.0.1:9", data_root=str(tmp_path), service_timeout=2)
    verdicts = down.score(items)
    assert [v.id for v in verdicts] == ids and {v.status for v in verdicts} == {"error"}
