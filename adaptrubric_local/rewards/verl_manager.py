"""A verl 0.9.1 reward-loop manager that finds each rollout's trajectory wherever verl left it
(when each route needs it: docs/rewards.md, "verl's routes").

verl hands the agent loop's `extra_fields` to the reward function by two routes:

- streaming: verl's `NaiveRewardManager` merges the rollout's `tool_extra_fields` into `extra_info`
  (experimental/agent_loop/agent_loop.py:1016, experimental/reward_loop/reward_manager/naive.py:45-47);
- after rollout (`reward.reward_model.enable=True` without `enable_resource_pool`, verl's GenRM route
  included): the trainer scores the whole batch (trainer/ppo/ray_trainer.py:1563-1565), whose samples
  carry no `tool_extra_fields`: `_postprocess` made every extra field a top-level key of
  `non_tensor_batch` (agent_loop.py:1121-1135), which verl's own manager does not pass on.

`TrajectoryRewardManager` is verl's `NaiveRewardManager` plus one step: it gives each sample its own
copy of `extra_info` holding the sample's `trajectory` (from `tool_extra_fields`, else the top-level
key). The copy matters: after `batch.repeat(..., interleave=True)` the n rollouts of a prompt share
ONE `extra_info` dict, and verl's manager writes into it from concurrent tasks. Select it with

    reward.reward_manager.source=importlib
    reward.reward_manager.module.path=pkg://adaptrubric_local.rewards.verl_manager
    reward.reward_manager.name=TrajectoryRewardManager

Imports verl: load it only where verl is installed. Knows nothing about scoring (rewards/ does it).
"""
from __future__ import annotations

import numpy as np
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

TRAJECTORY_KEY = "trajectory"


def with_trajectory(data: DataProto, key: str = TRAJECTORY_KEY) -> DataProto:
    """`data` (one sample, as verl's reward loop passes it) whose `extra_info` is a fresh dict that
    holds the sample's trajectory when verl left one in `tool_extra_fields` or as a top-level key."""
    ntb = data.non_tensor_batch
    infos = []
    for i in range(len(data)):
        info = dict(ntb["extra_info"][i] or {}) if "extra_info" in ntb else {}
        fields = ntb["tool_extra_fields"][i] if "tool_extra_fields" in ntb else None
        if isinstance(fields, dict) and key in fields:
            info[key] = fields[key]
        elif key in ntb and key not in info:
            info[key] = ntb[key][i]
        infos.append(info)
    extra = np.empty(len(infos), dtype=object)
    extra[:] = infos
    return DataProto(batch=data.batch, non_tensor_batch={**ntb, "extra_info": extra}, meta_info=data.meta_info)


class TrajectoryRewardManager(NaiveRewardManager):
    """verl's NaiveRewardManager, with each sample's trajectory in its own `extra_info`."""

    async def run_single(self, data: DataProto) -> dict:
        return await super().run_single(with_trajectory(data))
