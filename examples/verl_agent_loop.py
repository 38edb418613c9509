"""verl 0.9.1: AdaptRubric rewards on the policy's own rollouts through the agent loop.

The agent loop stores each rollout's GUI episode in `output.extra_fields["trajectory"]`, where
`rewards.compute_score` finds it in `extra_info["trajectory"]`:

- by default (no reward model in verl, or one on its own resource pool) the agent loop streams each
  rollout to a reward worker with `tool_extra_fields` (agent_loop.py:1016), which verl's reward manager
  merges into `extra_info` (reward_loop/reward_manager/naive.py:45-47);
- with `reward.reward_model.enable=True` and no `reward.reward_model.enable_resource_pool=True`, verl
  scores the batch after rollout, where the trajectory is a top-level key of the batch: add the three
  `reward.reward_manager.*` overrides below (adaptrubric_local/rewards/verl_manager.py), or every sample
  is an error verdict "compute_score needs extra_info['trajectory']".

Training (launched from this repository's root, so that Ray's workers can import `examples.*`)::

    ADAPTRUBRIC_CONFIG=$PWD/examples/reward.yaml python -m verl.trainer.main_ppo \\
        actor_rollout_ref.rollout.agent.agent_loop_config_path=examples/verl_agent_loops.yaml \\
        reward.custom_reward_function.path=pkg://adaptrubric_local.rewards \\
        reward.custom_reward_function.name=compute_score \\
        reward.reward_manager.source=importlib reward.reward_manager.name=TrajectoryRewardManager \\
        reward.reward_manager.module.path=pkg://adaptrubric_local.rewards.verl_manager ...

with the dataset's `agent_name` column set to `adaptrubric_gui` (examples/verl_agent_loops.yaml maps it
to the class below). On several nodes, see examples/README.md for PYTHONPATH and the environment of
verl's workers. With `reward.num_workers` reward processes (8 by default) each would load a verifier:
start `adaptrubric serve` and set `service_url` in reward.yaml so they share one.

`tests/test_rewards_verl.py` runs this loop in verl's own AgentLoopWorker, with a scripted policy in
place of the LLM server and a replayed environment in place of `run_episode`.
"""
from __future__ import annotations

import asyncio

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop


@register("adaptrubric_gui")
class GUIAgentLoop(SingleTurnAgentLoop):
    """Generate as usual, play the response in the GUI environment, keep the episode for the reward."""

    async def run(self, sampling_params, **kwargs) -> AgentLoopOutput:
        output = await super().run(sampling_params, **kwargs)
        text = self.tokenizer.decode(output.response_ids, skip_special_tokens=True)
        episode = await asyncio.to_thread(run_episode, kwargs.get("extra_info") or {}, text)
        output.extra_fields["trajectory"] = episode  # -> extra_info["trajectory"] in compute_score
        return output


def run_episode(task: dict, response: str) -> dict:
    """Execute the policy's actions in your environment and return the canonical episode record
    ({"id", "instruction", "steps": [{"screenshot", "action"}]}). Replace with your emulator.
    A screenshot may be a path the reward side can read, or the image itself (PNG/JPEG bytes or a
    data URL); with a remote `adaptrubric serve`, set `inline_images: true` in reward.yaml."""
    raise NotImplementedError("connect your GUI environment here")
