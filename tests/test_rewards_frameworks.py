"""verl 0.9.1 and OpenRLHF 0.11.2 do not install on this CPU machine (vLLM, Ray, DeepSpeed), so these
tests call the adapters exactly as those versions do; each test cites the file and lines of the
released wheel (verl-0.9.1-py3-none-any.whl, openrlhf-0.11.2 wheel) it imitates. The rollouts of one
prompt carry different trajectories, so the rewards must differ within the group, and the verifier
must load once although the calls come from many threads."""
import asyncio
import importlib.util
import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from adaptrubric_local import load_trajectories, rewards

ROOT = Path(__file__).resolve().parents[1]
REWARDS_FILE = Path(rewards.__file__)
KEYS = {"score", "unparsed", "error", "p_success", "category", "status", "detail"}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def group(synth_set):
    """4 rollouts of the same task, labelled differently, and a counting scripted verifier."""
    trajs = [t.to_dict() for t in load_trajectories(synth_set).trajectories if t.task_id == "t000"]
    ex = _load(ROOT / "examples" / "trl_grpo.py", "trl_example")
    made = []
    lock = threading.Lock()

    def factory():
        with lock:
            made.append(1)
        return ex.scripted_verifier(trajs)

    rewards.configure(engine_factory=factory, batch_window_ms=30)
    yield trajs, made
    rewards.configure(engine=ex.scripted_verifier(trajs))


def test_verl_reward_loop_single_calls_from_threads(group):
    trajs, made = group
    # verl/utils/import_utils.py:182-183 loads the reward file under a fresh module name
    mod = _load(REWARDS_FILE, f"custom_module_{hash(os.path.abspath(REWARDS_FILE))}")
    compute_score = mod.compute_score
    # experimental/agent_loop/agent_loop.py:1016: the agent loop's extra_fields become tool_extra_fields
    tool_extra_fields = np.array([{"trajectory": t, "turn_scores": []} for t in trajs * 2], dtype=object)

    async def run_single(fields):  # experimental/reward_loop/reward_manager/naive.py:42-99
        extra_info = {"index": 3}
        extra_info.update(fields.items())
        extra_info["num_turns"] = 2
        extra_info["rollout_reward_scores"] = {}
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(None, lambda: compute_score(
            data_source="gui", solution_str="tap(1)", ground_truth=None, extra_info=extra_info))
        assert isinstance(result, dict)
        return result["score"], result

    async def main():
        return await asyncio.gather(*(run_single(f) for f in tool_extra_fields))

    out = asyncio.run(main())
    scores = [s for s, _ in out]
    assert len(made) == 1  # one verifier although 8 threads called at once
    assert scores == [float(t["label"]) for t in trajs * 2] and len(set(scores)) == 2
    assert all(set(r) == KEYS for _, r in out)


def test_verl_batch_reward_manager_plural_keywords(group):
    trajs, _ = group
    # workers/reward_manager/batch.py:56-76: numpy object arrays, extras mutated, one call, plural keywords
    data_sources = np.array(["gui"] * len(trajs), dtype=object)
    extras = np.array([{"trajectory": t} for t in trajs], dtype=object)
    for i in range(len(extras)):
        extras[i]["rollout_reward_scores"] = {}
    scores = rewards.compute_score(data_sources=data_sources, solution_strs=["a"] * len(trajs),
                                   ground_truths=[None] * len(trajs), extra_infos=extras)
    # batch.py:95-103: each item a dict whose "score" is the reward; every key becomes reward_extra_info
    assert [s["score"] for s in scores] == [float(t["label"]) for t in trajs]
    assert all(set(s) == KEYS for s in scores)
    extras[1] = {"no": "trajectory"}
    scores = rewards.compute_score(data_sources=data_sources, solution_strs=["a"] * len(trajs),
                                   ground_truths=[None] * len(trajs), extra_infos=extras)
    assert scores[1]["error"] == 1.0 and "extra_fields" in scores[1]["detail"] and scores[1]["score"] == 0.0
    assert scores[0]["score"] == float(trajs[0]["label"])


def test_openrlhf_remote_reward_func_file(group):
    trajs, made = group
    # utils/agent.py:198-205: --reward.remote_url ending in .py is loaded by path as "reward_func"
    reward_func = _load(REWARDS_FILE, "reward_func").reward_func
    labels = [json.dumps(t) for t in trajs]  # --data.label_key column, one per sample

    async def fetch():  # utils/agent.py:308-325: one sample per call, asyncio.to_thread, gathered
        return await asyncio.gather(*(asyncio.to_thread(reward_func, [f"q{i}"], ["p"], [lab])
                                      for i, lab in enumerate(labels)))

    infos = asyncio.run(fetch())
    assert len(made) == 1
    got = []
    for info in infos:  # utils/agent.py:293-302 then ppo_utils/samples_generator.py:289-292
        score = info.get("scores") if info.get("scores") is not None else info.get("rewards")
        logs = {k: (v.flatten()[0].item() if hasattr(v, "flatten") else v) for k, v in info["extra_logs"].items()}
        assert logs == {"adaptrubric_unparsed": 0.0, "adaptrubric_error": 0.0}
        got.append(float(score[0]))
    assert got == [float(t["label"]) for t in trajs]


def test_openrlhf_agent_route(group):
    trajs, made = group
    # trainer/ray/vllm_engine.py:19-30 loads --train.agent_func_path by path as "agent_module"
    agent_module = _load(ROOT / "examples" / "openrlhf_agent.py", "agent_module")
    label = json.dumps({"id": "t000", "instruction": trajs[0]["instruction"], "candidates": trajs})

    async def execute(action):  # utils/agent.py:37-43 (reset) and 91-127 (generation/step loop)
        agent = agent_module.AgentInstance()
        reset = await agent.reset({"observation": "prompt", "label": label})
        total, extra_logs = 0, {}
        while True:
            step_result = await agent.step({"observation_text": reset["observation"], "action_text": action,
                                            "label": label, "sampling_params": None})
            total += step_result["rewards"].item()
            final_scores = step_result.get("scores", total)
            assert isinstance(step_result["environment_feedback"], str)
            extra_logs = step_result.get("extra_logs", {})
            if step_result["done"]:
                return total, float(final_scores[0]), extra_logs

    async def main():
        return await asyncio.gather(*(execute(f"tap({i})") for i in range(8)))

    results = asyncio.run(main())
    assert len(made) == 1
    rs = [r for r, _, _ in results]
    pool = agent_module.GUIEnv
    expected = []
    for i in range(8):
        env = pool({"id": "t000", "instruction": "", "candidates": trajs})
        env.act(f"tap({i})")
        expected.append(float(next(t["label"] for t in trajs if t["steps"] == env.steps)))
    assert rs == expected and len(set(rs)) == 2
    assert all(logs["adaptrubric_error"].item() == 0.0 for _, _, logs in results)
