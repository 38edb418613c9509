"""verl 0.9.1: AdaptRubric rewards on the policy's own rollouts through the agent loop.

The agent loop stores each rollout's GUI episode in `output.extra_fields["trajectory"]`; verl hands
`extra_fields` to the reward manager as `tool_extra_fields` (agent_loop.py:1016), which merges them
into `extra_info` (reward_loop/reward_manager/naive.py:45-47), where `rewards.compute_score` reads it.

Training (verl installed; the agent loop class below is registered on import)::

    ADAPTRUBRIC_CONFIG=reward.yaml python -m verl.trainer.main_ppo \\
        actor_rollout_ref.rollout.agent.agent_loop_config_path=examples/verl_agent_loops.yaml \\
        reward.custom_reward_function.path=pkg://adaptrubric_local.rewards \\
        reward.custom_reward_function.name=compute_score ...

with examples/verl_agent_loops.yaml::

    - name: adaptrubric_gui
      _target_: examples.verl_agent_loop.GUIAgentLoop

and the dataset's `agent_name` column set to `adaptrubric_gui`. `pkg://` imports the package module
(a plain file path works too: the verifier state lives in the package either way). With
`reward.num_workers` reward processes (8 by default) each would load a verifier: start
`adaptrubric serve` and set `service_url` in reward.yaml so they share one.

Without verl, `python examples/verl_agent_loop.py` replays what verl does with the returned
fields (reward loop and batch manager) on synthetic episodes and a scripted verifier.
"""
from __future__ import annotations

import asyncio
import tempfile

try:  # verl is optional: the class is defined only where verl is installed
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
except ImportError:
    SingleTurnAgentLoop = None

if SingleTurnAgentLoop is not None:

    @register("adaptrubric_gui")
    class GUIAgentLoop(SingleTurnAgentLoop):
        """Generate as usual, play the response in the GUI environment, keep the episode for the reward."""

        async def run(self, sampling_params, **kwargs) -> "AgentLoopOutput":
            output = await super().run(sampling_params, **kwargs)
            text = self.tokenizer.decode(output.response_ids, skip_special_tokens=True)
            episode = await asyncio.to_thread(run_episode, kwargs.get("extra_info") or {}, text)
            output.extra_fields["trajectory"] = episode  # -> extra_info["trajectory"] in compute_score
            return output


def run_episode(task: dict, response: str) -> dict:
    """Execute the policy's actions in your environment and return the canonical episode record
    ({"id", "instruction", "steps": [{"screenshot", "action"}]}). Replace with your emulator."""
    raise NotImplementedError("connect your GUI environment here")


def replay(n: int = 4) -> list[float]:
    """What verl does with the agent loop's fields, without verl: returns the rewards."""
    import importlib.util
    from pathlib import Path

    import numpy as np

    from adaptrubric_local import load_trajectories, rewards
    from adaptrubric_local.synth import synthesize

    spec = importlib.util.spec_from_file_location("trl_example", Path(__file__).with_name("trl_grpo.py"))
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    trajs = [t.to_dict() for t in load_trajectories(synthesize(tempfile.mkdtemp(), n_tasks=1, candidates=n,
                                                               size=(90, 200))).trajectories]
    rewards.configure(engine=ex.scripted_verifier(trajs))
    extra_fields = np.array([{"trajectory": t} for t in trajs], dtype=object)  # agent_loop.py:1016
    out = []
    for fields in extra_fields:  # reward loop: one sample per call (naive.py:42-85)
        extra_info = {"index": 0}
        extra_info.update(fields.items())
        out.append(rewards.compute_score(data_source="gui", solution_str="...", ground_truth=None,
                                         extra_info=extra_info)["score"])
    return out


if __name__ == "__main__":
    print("rewards of 4 rollouts of one prompt:", replay())
