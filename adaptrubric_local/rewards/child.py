"""What a reward function needs in a process that hides its GPUs, as the child TRL's AsyncGRPOTrainer runs
reward functions in: `AsyncRolloutWorker.start` pickles the reward functions and spawns a child that sets
`CUDA_VISIBLE_DEVICES=""` first (trl 1.16.0, trl/experimental/async_grpo/async_rollout_worker.py,
`_scrub_child_env` and `AsyncRolloutWorker.start`). A verifier loaded there would run on the CPU, minutes per
trajectory, without a word: `check_gpus_visible` makes that an error that names the fix (serve the verifier;
`device_map="cpu"` when the CPU is meant). `portable_options` are what a pickled RewardModel is rebuilt from
in that child: built from its options, unloaded, so a `service_url` verifier loads nothing there.

Knows nothing about RL frameworks beyond that environment variable, nor about HTTP.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

LOCAL_ENGINES = ("transformers", "vllm")


def check_gpus_visible(engine_options: Mapping[str, Any]) -> None:
    """Raise before a local model loads on the CPU in a process whose GPUs were hidden, unless the options
    ask for the CPU (`device_map="cpu"`, transformers engine)."""
    engine = engine_options.get("engine")
    gpus_hidden = os.environ.get("CUDA_VISIBLE_DEVICES") == ""  # every GPU hidden on purpose
    if engine not in LOCAL_ENGINES or engine_options.get("openai_url") or not gpus_hidden:
        return
    if engine == "transformers" and engine_options.get("device_map") == "cpu":
        return
    model = engine_options.get("model")
    raise RuntimeError(
        f"the verifier {model!r} ({engine} engine) would load on the CPU here: this process hides every GPU "
        f"(CUDA_VISIBLE_DEVICES=''), as TRL's AsyncGRPOTrainer does in the child that runs reward functions "
        f"(pid {os.getpid()}). Serve the verifier instead: run `adaptrubric serve --model {model} --port 8000` "
        f"on a GPU and give the reward service_url='http://HOST:8000' (RewardModel(service_url=...), "
        f"`service_url:` in $ADAPTRUBRIC_CONFIG, or $ADAPTRUBRIC_SERVICE_URL); device_map='cpu' loads it on "
        f"the CPU on purpose (docs/rewards.md, \"TRL's async GRPO\")")


HELD = ("engine", "engine_factory", "judge_engine")


def portable_options(cls_name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The constructor options a pickled RewardModel carries to another process; an engine instance or
    factory (a loaded model, a closure) cannot travel, which is a TypeError saying what to give instead."""
    held = [k for k in HELD if options.get(k) is not None and not isinstance(options[k], str)]
    if held:
        raise TypeError(f"a {cls_name} holding {', '.join(held)} cannot be sent to another process (TRL's "
                        f"AsyncGRPOTrainer pickles reward functions into a child): give service_url (a running "
                        f"`adaptrubric serve`), openai_url, or the model's options, which the child builds from")
    return dict(options)
