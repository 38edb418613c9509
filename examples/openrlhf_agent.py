"""OpenRLHF 0.11.2: AdaptRubric rewards on the policy's own rollouts through the agent route.

    ADAPTRUBRIC_CONFIG=reward.yaml python -m openrlhf.cli.train_ppo_ray \\
        --train.agent_func_path examples/openrlhf_agent.py --data.label_key task ...

OpenRLHF loads this file by path (trainer/ray/vllm_engine.py:19-30), builds `AgentExecutor()` and,
per rollout, calls `AgentInstance.step(states)` after each generation (utils/agent.py:113-127); the
last step returns the verifier's reward for the episode the policy just played. Its `extra_logs`
(`adaptrubric_unparsed`, `adaptrubric_error`) become per-sample info that OpenRLHF logs
(trainer/ppo_utils/samples_generator.py:289-292). Each vLLM engine actor loads this file: set
`service_url` in reward.yaml (`adaptrubric serve`) so all of them share one verifier.

Without OpenRLHF, `python examples/openrlhf_agent.py` replays the executor's calls on synthetic
episodes with a scripted verifier.
"""
from __future__ import annotations

import asyncio
import json
import tempfile

from adaptrubric_local import rewards

try:
    from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor
except ImportError:  # replay mode: the same interface, without OpenRLHF
    AgentInstanceBase, MultiTurnAgentExecutor = object, None


class GUIEnv:
    """Your emulator: `act(action_text)` executes one action and returns the screenshot path after it.
    This stand-in replays a recorded episode chosen by the first action (for the replay below)."""

    def __init__(self, task: dict):
        self.task = task
        self.steps: list[dict] = []

    def act(self, action: str) -> None:
        pool = self.task["candidates"]
        episode = pool[sum(map(ord, action)) % len(pool)]
        self.steps = episode["steps"]

    def trajectory(self) -> dict:
        return {"id": self.task["id"], "instruction": self.task["instruction"], "steps": self.steps}


class AgentInstance(AgentInstanceBase):
    """One rollout: every generation is an action; the episode ends after `max_turns` actions."""

    max_turns = 1

    def __init__(self, *args, **kwargs):
        self.env = None
        self.turns = 0

    async def reset(self, states: dict, **kwargs):
        label = states["label"]
        self.env = GUIEnv(json.loads(label) if isinstance(label, str) else label)
        return {"observation": states["observation"]}

    async def step(self, states: dict, **kwargs):
        self.env.act(states["action_text"])
        self.turns += 1
        if self.turns >= self.max_turns:
            return await rewards.openrlhf_final_step(self.env.trajectory())
        import torch

        return {"rewards": torch.tensor([0.0]), "scores": torch.tensor([0.0]), "environment_feedback": "",
                "done": False, "extra_logs": {}}


if MultiTurnAgentExecutor is not None:

    class AgentExecutor(MultiTurnAgentExecutor):
        def __init__(self):
            super().__init__(AgentInstance)


async def replay(actions: list[str]) -> list[float]:
    """The executor's reset/step calls for a few rollouts of one prompt, run concurrently."""
    import importlib.util
    from pathlib import Path

    from adaptrubric_local import load_trajectories
    from adaptrubric_local.synth import synthesize

    spec = importlib.util.spec_from_file_location("trl_example", Path(__file__).with_name("trl_grpo.py"))
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    trajs = [t.to_dict() for t in load_trajectories(synthesize(tempfile.mkdtemp(), n_tasks=1, candidates=4,
                                                               size=(90, 200))).trajectories]
    rewards.configure(engine=ex.scripted_verifier(trajs))
    label = json.dumps({"id": "task0", "instruction": trajs[0]["instruction"], "candidates": trajs})

    async def one(action):
        agent = AgentInstance()
        await agent.reset({"observation": "prompt", "label": label})
        res = await agent.step({"observation_text": "prompt", "action_text": action, "label": label,
                                "sampling_params": None})
        return res["rewards"].item()

    return list(await asyncio.gather(*(one(a) for a in actions)))


if __name__ == "__main__":
    print("rewards:", asyncio.run(replay(["tap(1)", "tap(2)", "tap(3)", "tap(4)"])))
