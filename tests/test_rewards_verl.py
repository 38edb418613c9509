"""The real verl 0.9.1 calling the package's adapters: `rewards.compute_score`, the agent loop of
examples/verl_agent_loop.py (built by hydra from examples/verl_agent_loops.yaml) and
`verl_reward_manager.TrajectoryRewardManager`.

Driven for real: the legacy NaiveRewardManager and BatchRewardManager on DataProto batches, the reward
loop's RewardLoopWorker, RewardLoopManager on a local Ray cluster with 2 CPU reward workers scoring
through `adaptrubric serve`, and AgentLoopWorker in both of verl's reward routes (streaming to the reward
workers; scoring the batch after rollout). Imitated, because it cannot run here: the policy's LLM
server (verl's `LLMServerClient.generate`, workers/rollout/llm_server.py; vLLM/SGLang need a GPU) is a
scripted policy, and the GUI environment (`run_episode` of the example) replays synthetic episodes.
verl is installed by `make test` with --no-deps (Makefile, RL_FRAMEWORKS); without it these tests skip."""
import asyncio
import os
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `make test` (make install-rl)")
pytest.importorskip("ray")

import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from rl_support import (
    EXAMPLES,
    ROOT,
    episode_for,
    save_policy,
    start_service,
    stop_service,
    task_group,
)
from verl import DataProto

from adaptrubric_local import rewards

REWARDS_FILE = Path(rewards.__file__)
KEYS = {"score", "unparsed", "error", "p_success", "category", "status", "detail"}
MANAGER = ["reward.reward_manager.source=importlib", "reward.reward_manager.name=TrajectoryRewardManager",
           "reward.reward_manager.module.path=pkg://adaptrubric_local.rewards.verl_manager"]
NEEDS_TRAJ = "compute_score needs extra_info['trajectory']"


def verl_config(policy: Path, *overrides: str):
    """verl's own trainer config (ppo_trainer.yaml, composed by hydra as main_ppo does) with `overrides`."""
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return compose(config_name="ppo_trainer", overrides=[
            f"actor_rollout_ref.model.path={policy}", "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.prompt_length=64", "actor_rollout_ref.rollout.response_length=16",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={EXAMPLES / 'verl_agent_loops.yaml'}",
            "reward.custom_reward_function.path=pkg://adaptrubric_local.rewards",
            "reward.custom_reward_function.name=compute_score", *overrides])


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return save_policy(tmp_path_factory.mktemp("policy"))


@pytest.fixture(scope="module")
def tokenizer(policy):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(policy)


def rollout_batch(tokenizer, extra_infos: list, **non_tensors) -> DataProto:
    """A batch as verl's trainer holds it after rollout: prompts, responses, attention mask, and the
    dataset's columns (data_source, reward_model, extra_info) per sample."""
    n = len(extra_infos)
    prompt = torch.tensor([tokenizer.encode("Turn on Wi-Fi.")] * n)
    response = torch.tensor([tokenizer.encode("tap(1)")] * n)
    extra = np.empty(n, dtype=object)
    extra[:] = extra_infos
    return DataProto.from_dict(
        tensors={"prompts": prompt, "responses": response, "input_ids": torch.cat([prompt, response], 1),
                 "attention_mask": torch.ones(n, prompt.shape[1] + response.shape[1], dtype=torch.long)},
        non_tensors={"data_source": np.array(["gui"] * n, dtype=object),
                     "reward_model": np.array([{"ground_truth": None}] * n, dtype=object),
                     "extra_info": extra, **non_tensors})


def score_batch(config, data: DataProto) -> list[dict]:
    """verl's RewardLoopWorker scoring `data` in-process (built inside the event loop it runs in, as in
    its Ray actor: the reward manager keeps the loop it was built in)."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    async def main():
        return await RewardLoopWorker(config).compute_score_batch(data)

    return asyncio.run(main())


def test_legacy_naive_manager_loads_the_file_by_path(group, tokenizer, policy):
    trajs, made = group
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager.naive import NaiveRewardManager

    # verl loads a file path under a fresh module name; the verifier state lives in the package
    fn = get_custom_reward_fn(verl_config(policy, f"reward.custom_reward_function.path={REWARDS_FILE}"))
    manager = NaiveRewardManager(tokenizer, num_examine=0, compute_score=fn)
    out = manager(rollout_batch(tokenizer, [{"trajectory": t} for t in trajs]), return_dict=True)
    assert out["reward_tensor"].sum(-1).tolist() == [float(t["label"]) for t in trajs]
    assert set(out["reward_extra_info"]) == KEYS and out["reward_extra_info"]["status"] == ["ok"] * len(trajs)
    assert len(made) == 1


def test_legacy_batch_manager_one_call_plural_keywords(group, tokenizer):
    trajs, _ = group
    from verl.workers.reward_manager.batch import BatchRewardManager

    manager = BatchRewardManager(tokenizer, num_examine=0, compute_score=rewards.compute_score)
    infos = [{"trajectory": t} for t in trajs] + [{"no": "trajectory"}]
    out = manager(rollout_batch(tokenizer, infos), return_dict=True)
    assert out["reward_tensor"].sum(-1).tolist() == [float(t["label"]) for t in trajs] + [0.0]
    info = out["reward_extra_info"]
    assert info["status"] == ["ok"] * len(trajs) + ["error"] and NEEDS_TRAJ in info["detail"][-1]


def test_reward_loop_worker_scores_each_rollout_once_loaded(group, tokenizer, policy):
    trajs, made = group
    config = verl_config(policy)
    fields = np.empty(2 * len(trajs), dtype=object)  # the agent loop's extra_fields (agent_loop.py:1016)
    fields[:] = [{"trajectory": t, "turn_scores": []} for t in trajs * 2]
    data = rollout_batch(tokenizer, [{"index": 0} for _ in fields], tool_extra_fields=fields)
    out = score_batch(config, data)
    assert [o["reward_score"] for o in out] == [float(t["label"]) for t in trajs * 2]
    assert all(set(o["reward_extra_info"]) == KEYS for o in out)
    assert len(made) == 1  # one verifier although verl ran the calls from its thread pool


# ----------------------------------------------------------------------------- the agent loop
class ScriptedPolicy:
    """Stands in for verl's LLMServerClient (workers/rollout/llm_server.py): answers the k-th request
    with the action "tap(k)". vLLM/SGLang cannot run here."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.calls += 1
        return TokenOutput(token_ids=self.tokenizer.encode(f"tap({self.calls})"))


@pytest.fixture
def agent_loop(group, monkeypatch):
    """The example's agent loop module with its environment replaying the group's episodes."""
    trajs, _ = group
    monkeypatch.syspath_prepend(str(ROOT))  # hydra imports `examples.verl_agent_loop` (see the yaml)
    import examples.verl_agent_loop as ex

    played = []

    def run_episode(task, response):
        played.append(episode_for(trajs, response))
        return played[-1]

    monkeypatch.setattr(ex, "run_episode", run_episode)
    return played


def prompts_batch(n: int) -> DataProto:
    """n rollouts of one prompt as the trainer sends them to the agent loop: the dataset's columns,
    repeated with `interleave=True`, so all n share ONE extra_info dict (ray_trainer.py:1496)."""
    one = DataProto.from_dict(non_tensors={
        "raw_prompt": np.array([[{"role": "user", "content": "Turn on Wi-Fi."}]], dtype=object),
        "agent_name": np.array(["adaptrubric_gui"], dtype=object),
        "extra_info": np.array([{"index": 0}], dtype=object),
        "data_source": np.array(["gui"], dtype=object),
        "reward_model": np.array([{"ground_truth": None}], dtype=object),
        "index": np.array([0])})
    return one.repeat(repeat_times=n, interleave=True)


def test_after_rollout_route_needs_the_trajectory_manager(agent_loop, group, tokenizer, policy):
    """With the reward model enabled and no resource pool of its own, verl scores the batch after
    rollout (ray_trainer.py:1563-1565): no tool_extra_fields, the trajectory is a top-level key."""
    _trajs, made = group
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    config = verl_config(policy)
    worker = AgentLoopWorker(config, ScriptedPolicy(tokenizer), reward_loop_worker_handles=None)
    batch = asyncio.run(worker.generate_sequences(prompts_batch(6)))
    assert "tool_extra_fields" not in batch.non_tensor_batch and "rm_scores" not in batch.batch
    episodes = list(batch.non_tensor_batch["trajectory"])
    assert sorted(map(str, episodes)) == sorted(map(str, agent_loop))  # the loop's own episodes, in the batch
    expected = [float(t["label"]) for t in episodes]
    assert len(set(expected)) == 2

    plain = score_batch(config, batch)  # verl's NaiveRewardManager
    assert {o["reward_extra_info"]["status"] for o in plain} == {"error"}
    assert all(NEEDS_TRAJ in o["reward_extra_info"]["detail"] for o in plain)

    fixed = score_batch(verl_config(policy, *MANAGER), batch)
    assert [o["reward_score"] for o in fixed] == expected  # each rollout its own, despite the shared dict
    assert {o["reward_extra_info"]["status"] for o in fixed} == {"ok"} and len(made) == 1


# ----------------------------------------------------------------------------- GenRM: verl serves the verifier
@pytest.fixture
def reward_router(group, monkeypatch):
    """An OpenAI-compatible stub at a "host:port" router address, standing in for the vLLM/SGLang servers
    verl launches for reward.reward_model (they need a GPU); building a model in this process fails."""
    from openai_stub import Running, Stub, forbid_local_models, scores_by_final_frame

    from adaptrubric_local.rewards import shared as shared_reward

    trajs, made = group
    server = Running(Stub(scores_by_final_frame(trajs)))
    monkeypatch.delenv("ADAPTRUBRIC_CONFIG", raising=False)
    forbid_local_models(monkeypatch)
    yield server
    assert not made  # the process-wide verifier was never built either
    shared_reward._ROUTED.pop(server.url).close()
    server.close()


def genrm_worker(config, address: str):
    """verl's RewardLoopWorker as RewardLoopManager makes it when verl serves the reward model: with the
    router's address (reward_loop.py:340), which its reward manager passes to the reward function."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    return RewardLoopWorker(config, reward_router_address=address)


def test_genrm_verls_naive_manager_awaits_compute_score_async(group, reward_router, tokenizer, policy):
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    trajs, _ = group
    config = verl_config(policy, "reward.reward_model.enable=True", f"reward.reward_model.model_path={policy}",
                         "reward.reward_model.rollout.name=vllm",
                         "reward.custom_reward_function.name=compute_score_async")
    data = rollout_batch(tokenizer, [{"trajectory": t} for t in trajs * 2])

    async def main():
        worker = genrm_worker(config, reward_router.address)
        manager = worker.reward_manager
        assert type(manager) is NaiveRewardManager and manager.is_async_reward_score  # awaited, not threaded
        return await worker.compute_score_batch(data)

    out = asyncio.run(main())
    assert [o["reward_score"] for o in out] == [float(t["label"]) for t in trajs * 2]
    assert {o["reward_extra_info"]["status"] for o in out} == {"ok"}
    stub = reward_router.stub
    # each distinct rollout verified once (the repeats arrive together and share the batch), routed once
    assert sorted(c["images"][-1] for c in stub.of_kind("verify")) == sorted(stub.scores_of(trajs))
    assert len(stub.of_kind("route")) == len(stub.of_kind("cue")) == 1
    assert {c["model"] for c in stub.calls} == {str(policy)}  # the name verl serves reward_model.model_path under


def test_genrm_example_config_after_rollout(agent_loop, group, reward_router, tokenizer, policy):
    """examples/verl_genrm.yaml composed with verl's own trainer config: the agent loop's batch, scored
    after rollout by verl's RewardLoopWorker through TrajectoryRewardManager and compute_score_async."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from adaptrubric_local.rewards.verl_manager import TrajectoryRewardManager

    with initialize_config_dir(config_dir=str(EXAMPLES), version_base=None):
        config = compose(config_name="verl_genrm", overrides=[
            f"actor_rollout_ref.model.path={policy}", "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.prompt_length=64", "actor_rollout_ref.rollout.response_length=16",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={EXAMPLES / 'verl_agent_loops.yaml'}",
            f"reward.reward_model.model_path={policy}"])
    assert config.reward.reward_model.enable and not config.reward.reward_model.enable_resource_pool
    batch = asyncio.run(AgentLoopWorker(config, ScriptedPolicy(tokenizer), reward_loop_worker_handles=None)
                        .generate_sequences(prompts_batch(6)))
    assert "tool_extra_fields" not in batch.non_tensor_batch  # after rollout: the trajectory is a top-level key

    async def main():
        worker = genrm_worker(config, reward_router.address)
        assert isinstance(worker.reward_manager, TrajectoryRewardManager)
        return await worker.compute_score_batch(batch)

    out = asyncio.run(main())
    expected = [float(t["label"]) for t in batch.non_tensor_batch["trajectory"]]
    assert [o["reward_score"] for o in out] == expected and len(set(expected)) == 2
    assert {o["reward_extra_info"]["status"] for o in out} == {"ok"}
    stub = reward_router.stub
    assert sorted(c["images"][-1] for c in stub.of_kind("verify")) == sorted(
        stub.scores_of({e["id"]: e for e in batch.non_tensor_batch["trajectory"]}.values()))
    assert not stub.rejected


# ----------------------------------------------------------------------------- on Ray
@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory, synth_set, policy):
    """A local Ray cluster of 2 CPUs started as verl's main_ppo starts it (main_ppo.py:62-72), with the
    reward service's URL and key given to the workers through the runtime_env override a user passes
    (`+ray_kwargs.ray_init.runtime_env.env_vars.*`), not through this process's environment."""
    import ray
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    trajs = task_group(synth_set)
    url, proc = start_service(tmp_path_factory.mktemp("service"), trajs, key="test-key-123")
    config = verl_config(policy, "reward.num_workers=2", "ray_kwargs.ray_init.num_cpus=2",
                         f"+ray_kwargs.ray_init.runtime_env.env_vars.ADAPTRUBRIC_SERVICE_URL={url}",
                         "+ray_kwargs.ray_init.runtime_env.env_vars.ADAPTRUBRIC_API_KEY=test-key-123")
    assert not {"ADAPTRUBRIC_SERVICE_URL", "ADAPTRUBRIC_API_KEY", "ADAPTRUBRIC_CONFIG"} & set(os.environ)
    runtime_env = OmegaConf.merge(get_ppo_ray_runtime_env(config), config.ray_kwargs.ray_init.runtime_env)
    ray.init(num_cpus=2, runtime_env=OmegaConf.to_container(runtime_env), include_dashboard=False,
             log_to_driver=False)
    try:
        yield config, trajs
    finally:
        ray.shutdown()
        stop_service(proc)


def test_reward_loop_manager_on_ray(ray_cluster, agent_loop, tokenizer):
    import ray
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    config, _trajs = ray_cluster
    manager = RewardLoopManager(config)
    assert len(manager.reward_loop_workers) == 2

    # streaming: the agent loop hands each finished rollout to a reward worker (agent_loop.py:967-1029)
    worker = AgentLoopWorker(config, ScriptedPolicy(tokenizer), reward_loop_worker_handles=manager.reward_loop_workers)
    batch = asyncio.run(worker.generate_sequences(prompts_batch(6)))
    expected = [float(t["label"]) for t in batch.non_tensor_batch["trajectory"]]
    assert sorted(map(str, batch.non_tensor_batch["trajectory"])) == sorted(map(str, agent_loop))
    assert batch.batch["rm_scores"].sum(-1).tolist() == expected and len(set(expected)) == 2
    assert list(batch.non_tensor_batch["status"]) == ["ok"] * 6

    # after rollout, verl's own manager on the same batch shape: the measured failure, now explained
    agent_loop.clear()
    plain = AgentLoopWorker(config, ScriptedPolicy(tokenizer), reward_loop_worker_handles=None)
    scored = manager.compute_rm_score(asyncio.run(plain.generate_sequences(prompts_batch(4))))
    assert set(scored.non_tensor_batch["status"]) == {"error"}
    assert scored.meta_info["reward_extra_keys"] and NEEDS_TRAJ in scored.non_tensor_batch["detail"][0]

    # the yaml's _target_ resolves in a Ray worker when the driver runs from the repository root
    @ray.remote
    def importable():
        import importlib

        return importlib.import_module("examples.verl_agent_loop").__file__

    if Path.cwd().resolve() == ROOT:
        assert Path(ray.get(importable.remote())).resolve() == EXAMPLES / "verl_agent_loop.py"
