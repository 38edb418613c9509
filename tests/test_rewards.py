"""RL reward adapters: their docstring examples run, and failures are reported, not turned into 0/1."""
import doctest

import pytest

from adaptrubric_local import FakeEngine, load_trajectories, rewards


def test_docstring_examples_run():
    result = doctest.testmod(rewards, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 12 and result.failed == 0


@pytest.fixture
def trajs(synth_set):
    return load_trajectories(synth_set).trajectories[:3]


def test_unparsed_and_bad_items(trajs):
    eng = FakeEngine(script=lambda r: "I think it worked." if r.kind == "verify" else "NO_HINT: fine")
    rewards.configure(engine=eng, unparsed_reward=-1.0)
    items = [trajs[0].to_dict(), {"id": "x", "instruction": "i", "steps": []}]
    assert rewards.trl_reward(completions=["", ""], trajectory=items) == [None, None]
    out = rewards.compute_score("gui", "", None, {"trajectory": items[1]})
    assert out["score"] == -1.0 and out["status"] == "error" and out["error"] == 1.0 and "no steps" in out["detail"]
    res = rewards.reward_func(["q", "q"], ["p", "p"], items)
    assert res["rewards"].tolist() == [-1.0, -1.0]
    logs = res["extra_logs"]
    assert logs["adaptrubric_unparsed"].tolist() == [1.0, 0.0] and logs["adaptrubric_error"].tolist() == [0.0, 1.0]


def test_soft_reward_and_batches(trajs):
    rewards.configure(engine=FakeEngine(p_score=lambda req, d: 0.8 if d == "1" else 0.2), reward="soft")
    assert rewards.trl_reward(completions=[""] * 3, trajectory=[t.to_dict() for t in trajs]) == [0.8, 0.8, 0.8]
    batch = rewards.compute_score(["gui"] * 2, ["", ""], [None, None], [{"trajectory": t.to_dict()} for t in trajs[:2]])
    assert [b["score"] for b in batch] == [0.8, 0.8]
    with pytest.raises(ValueError, match="trajectory"):
        rewards.trl_reward(completions=[""])
    rewards.configure(engine=FakeEngine())


def test_loads_by_file_path_like_verl_and_openrlhf(trajs):
    import importlib.util

    spec = importlib.util.spec_from_file_location("custom_module", rewards.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.configure(engine=FakeEngine())
    out = mod.reward_func(["q"], ["p"], [trajs[0].to_dict()])
    assert out["rewards"].tolist() == [1.0]
    assert mod.compute_score("gui", "", None, {"trajectory": trajs[0].to_dict()})["score"] == 1.0


def test_trl_environment_route_and_metrics(trajs):
    class Env:  # TRL's environment_factory: reward functions get `environments`, one per completion
        def __init__(self, t, as_method):
            self._t = t.to_dict()
            self.trajectory = (lambda: self._t) if as_method else self._t

    ids = [s.screenshot for s in trajs[0].steps]
    eng = FakeEngine(script=lambda r: "garbled" if r.kind == "verify" and not set(r.images) <= set(ids)
                     else FakeEngine().script(r))
    rewards.configure(engine=eng)
    logged = {}
    envs = [Env(trajs[0], True), Env(trajs[1], False)]
    vals = rewards.trl_reward(prompts=["p", "p"], completions=["a", "b"], environments=envs,
                              log_metric=logged.__setitem__)
    assert vals == [1.0, None]  # each environment's own episode was scored
    assert logged["adaptrubric/unparsed_rate"] == 0.5 and logged["adaptrubric/error_rate"] == 0.0
    with pytest.raises(ValueError, match="no 'trajectory'"):
        rewards.trl_reward(completions=["a"], environments=[object()])
    rewards.configure(engine=FakeEngine())
