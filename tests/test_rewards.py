"""RL reward adapters (rewards.py): their docstring examples run, every item gets its own reward in
order, metric names and result keys are pinned, and failures are reported, not turned into 0/1."""
import asyncio
import doctest
import json

import numpy as np
import pytest
import torch

from adaptrubric_local import FakeEngine, load_trajectories, rewards
from adaptrubric_local.types import Verdict

PASS = "SCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"


FAIL = "SCORE: 0\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"


@pytest.fixture
def three(synth_set):
    """Three trajectories of different tasks: the verifier passes the first, fails the second and
    answers the third with text that does not parse."""
    ts = load_trajectories(synth_set).trajectories
    picked = [ts[0], ts[3], ts[6]]
    fail_imgs = {s.screenshot for s in picked[1].steps}
    garbled_imgs = {s.screenshot for s in picked[2].steps}

    def script(r):
        if r.kind == "verify":
            if set(r.images) & fail_imgs:
                return FAIL
            if set(r.images) & garbled_imgs:
                return "garbled"
            return PASS
        return FakeEngine().script(r)

    engine = FakeEngine(script=script, p_score=lambda r, d: 0.75 if d == "1" else 0.25)
    yield picked, engine
    rewards.configure(engine=FakeEngine())


def _dicts(ts):
    return [t.to_dict() for t in ts]


def test_trl_reward_in_order_with_metrics(three):
    ts, eng = three
    rm = rewards.configure(engine=eng)
    assert rewards.reward_model() is rm
    logged = {}
    assert rewards.trl_reward(prompts=["p"] * 3, completions=["a", "b", "c"], trajectory=_dicts(ts),
                              log_metric=logged.__setitem__) == [1.0, 0.0, None]
    assert logged == {"adaptrubric/unparsed_rate": pytest.approx(1 / 3), "adaptrubric/error_rate": 0.0}
    # no completions given: one reward per trajectory, still in order
    assert rewards.trl_reward(trajectory=list(reversed(_dicts(ts)))) == [None, 0.0, 1.0]
    rewards.configure(engine=eng, reward="p_success")
    assert rewards.trl_reward(trajectory=_dicts(ts)) == [0.75, 0.25, None]


def test_trl_reward_errors(three):
    ts, eng = three
    rewards.configure(engine=eng)
    with pytest.raises(ValueError) as ei:
        rewards.trl_reward(completions=["a", "b", "c"], trajectory=_dicts(ts[:2]))
    assert str(ei.value) == "2 trajectories for 3 completions"
    with pytest.raises(ValueError) as ei:
        rewards.trl_reward(prompts=["p"], completions=["a"])
    assert str(ei.value) == (
        "trl_reward needs each completion's own trajectory: return a 'trajectory' list from rollout_func (TRL "
        "passes extra keys to reward functions) or give environments a 'trajectory'")

    class NoTraj:
        trajectory = None

    with pytest.raises(ValueError) as ei:
        rewards.trl_reward(environments=[NoTraj()])
    assert str(ei.value) == "environment NoTraj has no 'trajectory' (attribute or method)"


def test_trl_environments_in_order(three):
    ts, eng = three
    rewards.configure(engine=eng)

    class Env:
        def __init__(self, d):
            self.trajectory = d

    class MethodEnv:
        def __init__(self, d):
            self._d = d

        def trajectory(self):
            return self._d

    d = _dicts(ts)
    assert rewards.trl_reward(environments=[MethodEnv(d[1]), Env(d[0]), Env(d[2])]) == [0.0, 1.0, None]


def test_rates():
    assert rewards._rates([]) == {"unparsed_rate": 0.0, "error_rate": 0.0}
    vs = [Verdict(status="unparsed"), Verdict(status="error"), Verdict(status="error"), Verdict(status="ok")]
    assert rewards._rates(vs) == {"unparsed_rate": 0.25, "error_rate": 0.5}


def test_score_trajectories_in_order(three):
    ts, eng = three
    rewards.configure(engine=eng)
    vs = rewards.reward_model().score(list(_dicts(ts)))
    assert [(v.status, v.score) for v in vs] == [("ok", 1), ("ok", 0), ("unparsed", None)]


def test_compute_score_single_exact(three):
    ts, eng = three
    rewards.configure(engine=eng, unparsed_reward=-1.0)
    cats = [v.category for v in rewards.reward_model().score(_dicts(ts))]
    out = rewards.compute_score("gui", "", None, {"trajectory": ts[1].to_dict()})
    assert out == {"score": 0.0, "unparsed": 0.0, "error": 0.0, "p_success": 0.25, "category": cats[1],
                   "status": "ok", "detail": None}
    out = rewards.compute_score(extra_info={"trajectory": ts[0].to_dict()})
    assert out == {"score": 1.0, "unparsed": 0.0, "error": 0.0, "p_success": 0.75, "category": cats[0],
                   "status": "ok", "detail": None}
    out = rewards.compute_score(extra_info={"trajectory": ts[2].to_dict()})
    assert out["score"] == -1.0 and out["unparsed"] == 1.0 and out["error"] == 0.0 and out["status"] == "unparsed"
    assert isinstance(out["detail"], str) and out["detail"]
    out = rewards.compute_score(extra_info={"other": 1, "a": 2})
    assert out == {"score": -1.0, "unparsed": 0.0, "error": 1.0, "p_success": None, "category": None,
                   "status": "error", "detail": "compute_score needs extra_info['trajectory'] (put it in the agent "
                                                "loop's extra_fields); got ['a', 'other']"}
    out = rewards.compute_score(extra_info=None)
    assert out["detail"] == ("compute_score needs extra_info['trajectory'] (put it in the agent loop's "
                             "extra_fields); got NoneType")


def test_compute_score_batches_keep_order_and_bad_samples(three):
    ts, eng = three
    rewards.configure(engine=eng, unparsed_reward=-1.0)
    infos = np.array([{"trajectory": ts[1].to_dict()}, {"nope": 1}, {"trajectory": ts[0].to_dict()},
                      {"trajectory": ts[2].to_dict()}], dtype=object)
    out = rewards.compute_score(data_sources=np.array(["gui"] * 4, dtype=object), extra_infos=infos)
    assert [o["score"] for o in out] == [0.0, -1.0, 1.0, -1.0]
    assert [o["status"] for o in out] == ["ok", "error", "ok", "unparsed"]
    assert out[1]["detail"] == ("sample 1: compute_score needs extra_info['trajectory'] (put it in the agent "
                                "loop's extra_fields); got ['nope']")
    assert all(set(o) == {"score", "unparsed", "error", "p_success", "category", "status", "detail"} for o in out)
    # older callers passed lists in the singular keyword: a list of results, same order
    old = rewards.compute_score(extra_info=[{"trajectory": ts[0].to_dict()}, {"trajectory": ts[1].to_dict()}])
    assert [o["score"] for o in old] == [1.0, 0.0]
    old = rewards.compute_score(extra_info=({"trajectory": ts[1].to_dict()},))
    assert [o["score"] for o in old] == [0.0]


def test_reward_func_exact(three):
    ts, eng = three
    rewards.configure(engine=eng, unparsed_reward=-0.5)
    out = rewards.reward_func(["q"] * 3, ["p"] * 3, _dicts(ts))
    assert set(out) == {"rewards", "scores", "extra_logs"}
    assert out["rewards"].dtype == torch.float32 and out["rewards"].tolist() == [1.0, 0.0, -0.5]
    assert out["scores"].tolist() == [1.0, 0.0, -0.5] and out["scores"] is not out["rewards"]
    assert set(out["extra_logs"]) == {"adaptrubric_unparsed", "adaptrubric_error"}
    assert out["extra_logs"]["adaptrubric_unparsed"].tolist() == [0.0, 0.0, 1.0]
    assert out["extra_logs"]["adaptrubric_error"].tolist() == [0.0, 0.0, 0.0]


def test_openrlhf_final_step_exact(three):
    ts, eng = three
    rewards.configure(engine=eng, unparsed_reward=-0.5)
    res = asyncio.run(rewards.openrlhf_final_step(ts[1].to_dict(), "bye"))
    assert set(res) == {"rewards", "scores", "environment_feedback", "done", "extra_logs"}
    assert res["rewards"].dtype == torch.float32 and res["rewards"].tolist() == [0.0]
    assert res["scores"].tolist() == [0.0] and res["scores"] is not res["rewards"]
    assert res["environment_feedback"] == "bye" and res["done"] is True
    res = asyncio.run(rewards.openrlhf_final_step(ts[2].to_dict()))
    assert res["rewards"].tolist() == [-0.5] and res["environment_feedback"] == ""
    assert {k: v.tolist() for k, v in res["extra_logs"].items()} == {"adaptrubric_unparsed": [1.0],
                                                                      "adaptrubric_error": [0.0]}
    res = asyncio.run(rewards.openrlhf_final_step({"id": "x", "instruction": "i", "steps": []}))
    assert res["rewards"].tolist() == [-0.5]
    assert {k: v.tolist() for k, v in res["extra_logs"].items()} == {"adaptrubric_unparsed": [0.0],
                                                                      "adaptrubric_error": [1.0]}


def test_rewards_are_float32_whatever_the_default_dtype(three):
    ts, eng = three
    rewards.configure(engine=eng)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # a trainer may change it; OpenRLHF expects float32 rewards
    try:
        assert rewards.reward_func(["q"], ["p"], [ts[0].to_dict()])["rewards"].dtype == torch.float32
        assert asyncio.run(rewards.openrlhf_final_step(ts[0].to_dict()))["rewards"].dtype == torch.float32
    finally:
        torch.set_default_dtype(old)


def test_configure_reads_the_config_file(tmp_path, three):
    ts, eng = three
    cfg = tmp_path / "reward.json"
    cfg.write_text(json.dumps({"unparsed_reward": -2.0}))
    rm = rewards.configure(str(cfg), engine=eng)
    assert rm.config.unparsed_reward == -2.0 and rewards.reward_model() is rm
    assert rewards.compute_score(extra_info={"trajectory": ts[2].to_dict()})["score"] == -2.0


def test_rates_of_one_verdict_and_non_dict_extra_info():
    assert rewards._rates([Verdict(status="unparsed")]) == {"unparsed_rate": 1.0, "error_rate": 0.0}
    assert rewards.compute_score(extra_info="text")["detail"] == (
        "compute_score needs extra_info['trajectory'] (put it in the agent loop's extra_fields); got str")


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


# ----------------------------------------------------------------------------- verl's GenRM route
@pytest.fixture
def genrm(synth_set, monkeypatch):
    """A scripted OpenAI-compatible server at a router address (what verl hands the reward function when
    it serves the verifier), with nothing allowed to load a model in this process."""
    from openai_stub import Running, Stub, forbid_local_models, scores_by_final_frame
    from rl_support import task_group

    from adaptrubric_local.rewards import shared as shared_reward

    trajs = task_group(synth_set)
    server = Running(Stub(scores_by_final_frame(trajs), served="genrm-verifier"))
    monkeypatch.delenv("ADAPTRUBRIC_CONFIG", raising=False)
    forbid_local_models(monkeypatch)
    yield trajs, server
    shared_reward._ROUTED.pop(server.url).close()
    server.close()


def test_compute_score_against_verls_reward_router(genrm):
    from openai_stub import P_FAIL, P_PASS

    from adaptrubric_local.rewards import shared as shared_reward

    trajs, server = genrm
    kw = dict(data_source="gui", solution_str="tap(1)", ground_truth=None, reward_router_address=server.address,
              reward_model_tokenizer=None)
    called = [rewards.compute_score(extra_info={"trajectory": t}, **kw) for t in trajs]

    async def concurrently():
        return await asyncio.gather(*(rewards.compute_score_async(extra_info={"trajectory": t}, **kw) for t in trajs))

    awaited = asyncio.run(concurrently())
    labels = [float(t["label"]) for t in trajs]
    assert [c["score"] for c in called] == [a["score"] for a in awaited] == labels
    assert [a["p_success"] for a in awaited] == [pytest.approx(P_PASS if x else P_FAIL) for x in labels]
    assert {a["status"] for a in called + awaited} == {"ok"}
    stub = server.stub
    finals = [c["images"][-1] for c in stub.of_kind("verify")]
    assert len(finals) == 2 * len(trajs) and set(finals) <= set(stub.scores)
    assert len(stub.of_kind("route")) == len(stub.of_kind("cue")) == 1  # one instruction, cached in the process
    assert {c["model"] for c in stub.calls} == {"genrm-verifier"}  # no tokenizer: the server's one model
    rm = shared_reward.for_router(server.address)
    assert rm is shared_reward.for_router(server.url) and rm.loads == 1
    assert rm.load().engine.name == f"genrm-verifier@{server.url}"
