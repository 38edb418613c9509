"""Reward adapters with the signatures RL frameworks call: TRL `reward_funcs`, verl
`compute_score`, OpenRLHF `reward_func`.

A GUI rollout reaches the reward function as a trajectory: a `Trajectory`, a canonical record
dict (screenshot paths absolute, or relative to `data_root`), or a path to a file or folder in any
supported format. One process-wide scorer is built on first use from `configure(...)` or, when a
framework imports this module by path, from environment variables (`ADAPTRUBRIC_MODEL`,
`ADAPTRUBRIC_ADAPTER`, `ADAPTRUBRIC_LOAD_IN_4BIT=1`, `ADAPTRUBRIC_REWARD=binary|soft`,
`ADAPTRUBRIC_DATA_ROOT`). Routes and cues are cached per instruction, so a GRPO group shares them.

An unparsed or failed verdict is never silently a 0 or 1: TRL gets None (its "no reward" value);
verl and OpenRLHF need a number, so they get `unparsed_reward` (default 0.0, set it with
`configure`) with the status reported next to it ("status" key / `extra_logs`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional, Sequence

# absolute imports: verl and OpenRLHF load this file by path, outside the package
from adaptrubric_local.engine.base import Engine
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.formats.canonical import parse_record
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.types import Trajectory, Verdict

_STATE: dict[str, Any] = {"pipe": None, "reward": "binary", "unparsed_reward": 0.0, "data_root": "/"}


def configure(engine: Optional[Engine] = None, model: Optional[str] = None, adapter: Optional[str] = None,
              load_in_4bit: bool = False, config: Optional[PipelineConfig] = None, reward: str = "binary",
              unparsed_reward: float = 0.0, data_root: str = "/") -> AdaptRubric:
    """Set up the process-wide scorer. `reward`: "binary" (SCORE 0/1) or "soft" (P(SCORE=1))."""
    if reward not in ("binary", "soft"):
        raise ValueError(f"reward must be 'binary' or 'soft', got {reward!r}")
    if engine is None:
        from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

        engine = HFEngine(HFEngineConfig(model=model or "Qwen/Qwen3-VL-8B-Instruct", adapter=adapter,
                                         load_in_4bit=load_in_4bit))
    _STATE.update(pipe=AdaptRubric(engine, config or PipelineConfig()), reward=reward,
                  unparsed_reward=float(unparsed_reward), data_root=data_root)
    return _STATE["pipe"]


def _pipe() -> AdaptRubric:
    if _STATE["pipe"] is None:
        env = os.environ.get
        configure(model=env("ADAPTRUBRIC_MODEL"), adapter=env("ADAPTRUBRIC_ADAPTER"),
                  load_in_4bit=env("ADAPTRUBRIC_LOAD_IN_4BIT") == "1", reward=env("ADAPTRUBRIC_REWARD", "binary"),
                  data_root=env("ADAPTRUBRIC_DATA_ROOT", "/"))
    return _STATE["pipe"]


def to_trajectory(obj: Any, where: str = "trajectory") -> Trajectory:
    """A Trajectory from a Trajectory, a canonical dict (or its JSON), or a path to trajectory data."""
    if isinstance(obj, Trajectory):
        return obj
    if isinstance(obj, str) and obj.lstrip().startswith("{"):
        obj = json.loads(obj)
    if isinstance(obj, dict):
        return parse_record(obj, Path(_STATE["data_root"]), Path(f"<{where}>"), where)
    if isinstance(obj, (str, Path)):
        loaded = load_trajectories(obj)
        if not loaded.trajectories:
            raise ValueError(f"{where}: no trajectory in {obj}: {'; '.join(map(str, loaded.errors)) or 'empty'}")
        return loaded.trajectories[0]
    raise TypeError(f"{where}: expected a Trajectory, a canonical dict or a path, got {type(obj).__name__}")


def score_trajectories(items: Sequence[Any]) -> list[Verdict]:
    """Verdicts for a batch of trajectories in any accepted form; bad items become error verdicts."""
    trajs: list[Optional[Trajectory]] = []
    errors: dict[int, str] = {}
    for i, obj in enumerate(items):
        try:
            trajs.append(to_trajectory(obj, f"item {i}"))
        except Exception as exc:  # one bad rollout must not sink the batch
            trajs.append(None)
            errors[i] = str(exc)
    good = iter(_pipe().score([t for t in trajs if t is not None]))
    return [Verdict(status="error", error=errors[i]) if t is None else next(good) for i, t in enumerate(trajs)]


def _value(v: Verdict) -> Optional[float]:
    if v.status != "ok":
        return None
    if _STATE["reward"] == "soft" and v.p_success is not None:
        return float(v.p_success)
    return float(v.score)


def trl_reward(completions: Sequence[Any], trajectory: Optional[Sequence[Any]] = None, **kwargs) -> list[Optional[float]]:
    """TRL `GRPOTrainer(reward_funcs=[trl_reward])`: one reward per completion; the rollouts come in
    the dataset column `trajectory`. Unparsed or failed verdicts give None (TRL's "no reward").

    >>> import tempfile
    >>> from adaptrubric_local import FakeEngine, load_trajectories, rewards
    >>> from adaptrubric_local.synth import synthesize
    >>> _ = rewards.configure(engine=FakeEngine())
    >>> trajs = load_trajectories(synthesize(tempfile.mkdtemp(), n_tasks=1, candidates=2, size=(90, 200))).trajectories
    >>> rewards.trl_reward(completions=["", ""], prompts=["p", "p"], trajectory=[t.to_dict() for t in trajs])
    [1.0, 1.0]
    """
    if trajectory is None:
        raise ValueError("trl_reward needs the rollouts in a dataset column named 'trajectory'")
    if len(trajectory) != len(completions):
        raise ValueError(f"{len(trajectory)} trajectories for {len(completions)} completions")
    return [_value(v) for v in score_trajectories(trajectory)]


def compute_score(data_source: Any, solution_str: Any, ground_truth: Any = None, extra_info: Any = None,
                  **kwargs) -> Any:
    """verl `custom_reward_function` (`compute_score`): the rollout is `extra_info["trajectory"]`.
    Returns {"score", "status", "p_success", "category"}; lists in (verl's batch reward manager)
    give a list out.

    >>> import tempfile
    >>> from adaptrubric_local import FakeEngine, load_trajectories, rewards
    >>> from adaptrubric_local.synth import synthesize
    >>> _ = rewards.configure(engine=FakeEngine())
    >>> t = load_trajectories(synthesize(tempfile.mkdtemp(), n_tasks=1, candidates=1, size=(90, 200))).trajectories[0]
    >>> out = rewards.compute_score("gui", "", None, {"trajectory": t.to_dict()})
    >>> out["score"], out["status"], out["category"]
    (1.0, 'ok', 'create_modify')
    """
    if isinstance(extra_info, (list, tuple)):
        return [_verl_result(v) for v in score_trajectories([_traj_of(e) for e in extra_info])]
    return _verl_result(score_trajectories([_traj_of(extra_info)])[0])


def _traj_of(extra_info: Any) -> Any:
    if not isinstance(extra_info, dict) or "trajectory" not in extra_info:
        raise ValueError("compute_score needs extra_info['trajectory'] (a canonical dict or a path)")
    return extra_info["trajectory"]


def _verl_result(v: Verdict) -> dict:
    value = _value(v)
    return {"score": _STATE["unparsed_reward"] if value is None else value, "status": v.status,
            "p_success": v.p_success, "category": v.category, "error": v.error or v.parse_error}


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any]) -> dict:
    """OpenRLHF `--remote_rm_url reward_func.py`: each label (`--label_key`) carries the rollout's
    trajectory (a canonical dict, its JSON, or a path). Returns {"rewards", "scores", "extra_logs"}.

    >>> import tempfile
    >>> from adaptrubric_local import FakeEngine, load_trajectories, rewards
    >>> from adaptrubric_local.synth import synthesize
    >>> _ = rewards.configure(engine=FakeEngine())
    >>> trajs = load_trajectories(synthesize(tempfile.mkdtemp(), n_tasks=1, candidates=2, size=(90, 200))).trajectories
    >>> out = rewards.reward_func(["q", "q"], ["p", "p"], [t.to_dict() for t in trajs] )
    >>> out["rewards"].tolist(), out["extra_logs"]["unparsed"].tolist()
    ([1.0, 1.0], [0.0, 0.0])
    """
    import torch

    verdicts = score_trajectories(list(labels))
    values = [_value(v) for v in verdicts]
    rewards = torch.tensor([_STATE["unparsed_reward"] if x is None else x for x in values], dtype=torch.float32)
    return {"rewards": rewards, "scores": rewards.clone(),
            "extra_logs": {"unparsed": torch.tensor([float(v.status == "unparsed") for v in verdicts]),
                           "errors": torch.tensor([float(v.status == "error") for v in verdicts])}}
