"""OpenRLHF 0.11.2: AdaptRubric rewards on the policy's own rollouts through the agent route.

    ADAPTRUBRIC_CONFIG=reward.yaml python -m openrlhf.cli.train_ppo_ray \\
        --train.agent_func_path examples/openrlhf_agent.py --data.label_key task ...

OpenRLHF loads this file by path (trainer/ray/vllm_engine.py:19-30), builds `AgentExecutor()` and,
per rollout, calls `AgentInstance.step(states)` after each generation (utils/agent.py:113-127); the
last step returns the verifier's reward for the episode the policy just played. Its `extra_logs`
(`adaptrubric_unparsed`, `adaptrubric_error`) become per-sample info that OpenRLHF logs
(trainer/ppo_utils/samples_generator.py:289-292). Each vLLM engine actor loads this file: set
`service_url` in reward.yaml (`adaptrubric serve`) so all of them share one verifier.

`tests/test_rewards_openrlhf.py` runs this file through OpenRLHF's own loader, rollout actor and
executor, with a scripted policy in place of vLLM and the stand-in environment below.
"""
from __future__ import annotations

import json

from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from adaptrubric_local import rewards


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


class AgentExecutor(MultiTurnAgentExecutor):
    def __init__(self):
        super().__init__(AgentInstance)
