"""The real OpenRLHF 0.11.2 calling the package's adapters: the agent of examples/openrlhf_agent.py and
`rewards.reward_func`, each loaded by OpenRLHF's own loader, run by its rollout actor's
`generate_responses` and executors, and turned into experiences by its SamplesGenerator; and its HTTP
reward client against `adaptrubric serve`.

Imitated, because it cannot run here: vLLM (a GPU build). Its engine inside the rollout actor is a
scripted policy (`self.llm.generate`, trainer/ray/vllm_engine.py:153-177), the actor is built without
its `__init__` (which starts vLLM, vllm_engine.py:38-67), and `vllm` itself is an import stub
(tests/stubs/vllm: OpenRLHF imports it at module level). OpenRLHF is installed by `make test` with
--no-deps (Makefile, RL_FRAMEWORKS); without it these tests skip."""
import asyncio
import importlib.util
import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("openrlhf", reason="OpenRLHF 0.11.2 is installed by `make test` (make install-rl)")
pytest.importorskip("ray")

from rl_support import (
    EXAMPLES,
    save_policy,
    start_service,
    stop_service,
    task_group,
)

from adaptrubric_local import rewards

REWARDS_FILE = Path(rewards.__file__)
STUBS = Path(__file__).resolve().parent / "stubs"


@pytest.fixture(scope="module")
def openrlhf(monkeypatch_module):
    """OpenRLHF's rollout-side modules, importing the vllm stub when vLLM is not installed."""
    if importlib.util.find_spec("vllm") is None:
        monkeypatch_module.syspath_prepend(str(STUBS))
    from openrlhf.trainer.ppo_utils import samples_generator
    from openrlhf.trainer.ray import vllm_engine
    from openrlhf.utils import agent

    yield SimpleNamespace(vllm_engine=vllm_engine, agent=agent, samples=samples_generator)
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        if str(STUBS) in str(getattr(sys.modules[name], "__file__", "")):
            del sys.modules[name]


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(save_policy(tmp_path_factory.mktemp("policy")))


class ScriptedVLLM:
    """Stands in for the vLLM engine the rollout actor holds (`self.llm`): the k-th generation is the
    action "tap(k)"."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, 0

    async def generate(self, prompt, sampling_params, request_id):
        self.calls += 1
        text = f"tap({self.calls})"
        out = SimpleNamespace(token_ids=self.tokenizer.encode(text), text=text, finish_reason="stop", logprobs=None)
        yield SimpleNamespace(outputs=[out], prompt_token_ids=prompt["prompt_token_ids"])


def rollout_actor(openrlhf, executor, tokenizer):
    """OpenRLHF's RolloutRayActor, as a plain object (Ray's wrapper removed) without vLLM started."""
    actor = object.__new__(openrlhf.vllm_engine.RolloutRayActor.__ray_actor_class__)
    actor.executor, actor.llm, actor._mm_pad_token_ids = executor, ScriptedVLLM(tokenizer), None
    return actor


def generate(openrlhf, actor, tokenizer, label: str, n: int = 8) -> list:
    """The rollout actor's `generate_responses` for n samples of one prompt, then each response turned
    into an Experience by SamplesGenerator (samples_generator.py:243-322)."""
    from vllm import SamplingParams

    responses = asyncio.run(actor.generate_responses(
        prompt="Turn on Wi-Fi.", label=label, sampling_params=SamplingParams(max_tokens=8), max_length=512,
        hf_tokenizer=tokenizer, num_samples=n))
    gen = openrlhf.samples.SamplesGenerator(SimpleNamespace(args=None), None, None, tokenizer, [])
    return [gen._process_response_into_experience(r, max_len=512) for r in responses]


def test_agent_executor_loaded_by_path(openrlhf, group, tokenizer, monkeypatch):
    trajs, made = group
    executor = openrlhf.vllm_engine._load_agent_executor(str(EXAMPLES / "openrlhf_agent.py"))
    monkeypatch.setattr(executor.agent_instance_cls, "max_turns", 2)  # the executor's loop runs twice
    played, final_step = [], rewards.openrlhf_final_step

    async def recording(trajectory, *args):
        played.append(trajectory)
        return await final_step(trajectory, *args)

    monkeypatch.setattr(rewards, "openrlhf_final_step", recording)
    label = json.dumps({"id": "t000", "instruction": trajs[0]["instruction"], "candidates": trajs})
    actor = rollout_actor(openrlhf, executor, tokenizer)
    exps = generate(openrlhf, actor, tokenizer, label)

    assert actor.llm.calls == 16 and len(played) == 8  # 8 rollouts x 2 turns, one episode each
    assert all(any(p["steps"] == t["steps"] for t in trajs) for p in played)
    got = [e.rewards.item() for e in exps]
    assert sorted(got) == sorted(float(next(t["label"] for t in trajs if t["steps"] == p["steps"])) for p in played)
    assert len(set(got)) == 2 and [e.scores.item() for e in exps] == got  # each rollout its own episode's reward
    assert all(e.info["adaptrubric_unparsed"].item() == 0.0 and e.info["adaptrubric_error"].item() == 0.0
               for e in exps)
    assert len(made) == 1  # one verifier for the 8 concurrent rollouts


def test_remote_reward_function_loaded_by_path(openrlhf, group, tokenizer):
    trajs, made = group
    executor = openrlhf.agent.SingleTurnAgentExecutor(remote_rm_url=str(REWARDS_FILE))  # agent.py:196-205
    assert executor.reward_func is not None
    for t in trajs:  # --data.label_key: the label carries a recorded trajectory
        exps = generate(openrlhf, rollout_actor(openrlhf, executor, tokenizer), tokenizer, json.dumps(t), n=2)
        assert [e.rewards.item() for e in exps] == [float(t["label"])] * 2
        assert all(e.info["adaptrubric_error"].item() == 0.0 for e in exps)
    assert len(made) == 1


@pytest.fixture(scope="module")
def services(tmp_path_factory, synth_set):
    """The reward service twice: open, and with an API key."""
    trajs = task_group(synth_set)
    open_url, p1 = start_service(tmp_path_factory.mktemp("open"), trajs)
    keyed_url, p2 = start_service(tmp_path_factory.mktemp("keyed"), trajs, key="k-openrlhf")
    yield trajs, open_url, keyed_url
    stop_service(p1)
    stop_service(p2)


def test_http_reward_routes(openrlhf, services, tokenizer, monkeypatch, caplog):
    trajs, open_url, keyed_url = services
    t1 = next(t for t in trajs if t["label"] == 1)

    # OpenRLHF's own HTTP client (agent.py:327-365) against /openrlhf: lists, as its own serve_rm returns
    executor = openrlhf.agent.SingleTurnAgentExecutor(remote_rm_url=f"{open_url}/openrlhf")
    [exp] = generate(openrlhf, rollout_actor(openrlhf, executor, tokenizer), tokenizer, json.dumps(t1), n=1)
    assert exp.rewards.flatten().tolist() == [1.0] and exp.info["adaptrubric_error"].flatten().tolist() == [0.0]

    # that client sends no Authorization header: a keyed service answers 401 and OpenRLHF, after its
    # retries, logs it at INFO and leaves the reward empty (agent.py:303-304)
    monkeypatch.setattr(openrlhf.agent.asyncio, "sleep", _no_sleep)
    executor = openrlhf.agent.SingleTurnAgentExecutor(remote_rm_url=f"{keyed_url}/openrlhf")
    with caplog.at_level(logging.INFO):
        [exp] = generate(openrlhf, rollout_actor(openrlhf, executor, tokenizer), tokenizer, json.dumps(t1), n=1)
    assert exp.rewards is None and "401" in caplog.text

    # the route that carries the key: the reward file, forwarding to the service (ServiceClient)
    monkeypatch.setenv("ADAPTRUBRIC_API_KEY", "k-openrlhf")
    rewards.configure(service_url=keyed_url)
    executor = openrlhf.agent.SingleTurnAgentExecutor(remote_rm_url=str(REWARDS_FILE))
    for t in trajs:
        [exp] = generate(openrlhf, rollout_actor(openrlhf, executor, tokenizer), tokenizer, json.dumps(t), n=1)
        assert exp.rewards.item() == float(t["label"])


async def _no_sleep(_seconds):
    return None
