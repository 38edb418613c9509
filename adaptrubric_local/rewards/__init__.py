"""Reward adapters with the signatures RL frameworks call, as thin functions over one process-wide
`RewardModel` (rewards/model.py). Each completion is scored on the policy's OWN rollout, which reaches
the reward function like this (versions checked: TRL 1.16.0, verl 0.9.1, OpenRLHF 0.11.2; the wiring of
each: docs/rewards.md and examples/):

- TRL `GRPOTrainer(reward_funcs=[trl_reward], rollout_func=...)`: a `trajectory` list returned by the
  rollout function (TRL passes extra keys to reward functions), or each environment's `trajectory`
  (`environment_factory`). Rates go to TRL's logs through `log_metric`.
- verl `custom_reward_function.path=<this file>`, `name=compute_score`: the agent loop's
  `extra_fields["trajectory"]`, which verl merges into `extra_info`; one sample per call (the reward
  loop, from threads) or the legacy batch manager's plural keywords. The returned dict's keys become
  verl's `reward_extra_info`. GenRM route (`reward.reward_model.enable=True`, verl serves the verifier):
  name `compute_score_async`, which runs against verl's reward router, loading no model here
  (examples/verl_genrm.yaml).
- OpenRLHF `--train.agent_func_path agent.py`: the agent's `step()` returns
  `await openrlhf_final_step(trajectory)` when the episode ends. `--reward.remote_url <this file>` (or
  the service's `/openrlhf` URL) with `--data.label_key` scores a recorded trajectory per prompt: fixed
  data, which does not teach.

Configuration: `configure(config_path, **options)` in the trainer process, or a YAML/JSON file named
by `$ADAPTRUBRIC_CONFIG`; `$ADAPTRUBRIC_SERVICE_URL` sends everything to a running `adaptrubric serve`
(rewards/shared.py). The state lives in the package module, so frameworks that load this file by path
under a fresh module name share the same verifier.

An unparsed or failed verdict is never silently a 0 or 1: TRL gets None (its "no reward" value);
verl and OpenRLHF need a number, so they get `unparsed_reward` (default 0.0) with the status next
to it.
"""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

# absolute imports: verl and OpenRLHF load this file by path, outside the package
from adaptrubric_local.rewards import shared as _rm
from adaptrubric_local.rewards.model import RewardModel
from adaptrubric_local.types import Verdict

METRIC_PREFIX = "adaptrubric"
__all__ = ["METRIC_PREFIX", "RewardModel", "compute_score", "compute_score_async", "configure", "openrlhf_final_step",
           "reward_func", "reward_model", "trl_reward"]


def configure(config: str | None = None, **options) -> RewardModel:
    """Set the process-wide verifier from a YAML/JSON file and/or options (see RewardModel)."""
    return _rm.configure(config, **options)


def reward_model() -> RewardModel:
    """The process-wide verifier (built once, from $ADAPTRUBRIC_CONFIG when not configured)."""
    return _rm.shared()


def _rates(verdicts: Sequence[Verdict]) -> dict[str, float]:
    n = max(1, len(verdicts))
    return {"unparsed_rate": sum(v.status == "unparsed" for v in verdicts) / n,
            "error_rate": sum(v.status == "error" for v in verdicts) / n}


def _judge_metrics(rm: RewardModel) -> dict[str, float]:
    """With a judge (RewardModel(judge=...)): the live agreement over the window and its 95% interval,
    the share sent to the judge, and 1.0 while the warning holds; {} without a judge or a spot check yet."""
    live = rm.cascade_stats()
    if not live:
        return {}
    a = live["agreement"]
    out = {"judge_share": live["judge_share"], "judge_agreement": a["rate"], "judge_warning": float(a["warning"])}
    if a["ci95"]:
        out.update(judge_agreement_lo=a["ci95"][0], judge_agreement_hi=a["ci95"][1])
    return {k: float(v) for k, v in out.items() if v is not None}


# ----------------------------------------------------------------------------- TRL
def _env_trajectory(env: Any) -> Any:
    t = getattr(env, "trajectory", None)
    if t is None:
        raise ValueError(f"environment {type(env).__name__} has no 'trajectory' (attribute or method)")
    return t() if callable(t) else t


def trl_reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
               trajectory: Sequence[Any] | None = None, environments: Sequence[Any] | None = None,
               log_metric: Any = None, verifier: RewardModel | None = None, **kwargs) -> list[float | None]:
    """TRL reward function: one reward per completion, from the rollout's own trajectory (the
    `trajectory` key returned by `rollout_func`, or each environment's `trajectory`; for
    AsyncGRPOTrainer, which passes dataset columns, a `trajectory` column). Unparsed or
    failed verdicts give None; their rates are logged as `adaptrubric/unparsed_rate`, `.../error_rate`;
    with a judge, also `.../judge_agreement` (with `_lo`, `_hi`: its 95% interval), `.../judge_share`
    and `.../judge_warning`. `verifier`: the RewardModel to score with (None: the process-wide one);
    `functools.partial(trl_reward, verifier=RewardModel(service_url=URL))` is a reward function that
    pickles into AsyncGRPOTrainer's child process and loads no model there.

    Examples:
        >>> import tempfile
        >>> from adaptrubric_local import FakeEngine, load_trajectories, rewards
        >>> from adaptrubric_local.synth import synthesize
        >>> _ = rewards.configure(engine=FakeEngine())
        >>> data = synthesize(tempfile.mkdtemp(), n_tasks=1, candidates=3, size=(90, 200))
        >>> trajs = load_trajectories(data).trajectories
        >>> logged = {}
        >>> rewards.trl_reward(prompts=["p"] * 3, completions=["a", "b", "c"],
        ...                    trajectory=[t.to_dict() for t in trajs], log_metric=logged.__setitem__)
        [1.0, 1.0, 1.0]
        >>> logged
        {'adaptrubric/unparsed_rate': 0.0, 'adaptrubric/error_rate': 0.0}
    """
    if trajectory is None and environments is not None:
        trajectory = [_env_trajectory(e) for e in environments]
    if trajectory is None:
        raise ValueError("trl_reward needs each completion's own trajectory: return a 'trajectory' list from "
                         "rollout_func (TRL passes extra keys to reward functions) or give environments a "
                         "'trajectory'")
    if completions is not None and len(trajectory) != len(completions):
        raise ValueError(f"{len(trajectory)} trajectories for {len(completions)} completions")
    rm = verifier if verifier is not None else reward_model()
    verdicts = rm.score(list(trajectory))
    if log_metric is not None:
        for k, v in {**_rates(verdicts), **_judge_metrics(rm)}.items():
            log_metric(f"{METRIC_PREFIX}/{k}", v)
    return [rm.value(v) for v in verdicts]


# ----------------------------------------------------------------------------- verl
def _verl_traj(extra_info: Any) -> Any:
    if not isinstance(extra_info, dict) or "trajectory" not in extra_info:
        keys = sorted(extra_info) if isinstance(extra_info, dict) else type(extra_info).__name__
        raise ValueError(f"compute_score needs extra_info['trajectory'] (put it in the agent loop's extra_fields); "
                         f"got {keys}")
    return extra_info["trajectory"]


def _verl_result(rm: RewardModel, v: Verdict) -> dict:
    # the same keys every time: verl gathers each key into a list as long as the batch
    out = {"score": rm.number(v), "unparsed": float(v.status == "unparsed"), "error": float(v.status == "error"),
           "p_success": v.p_success, "category": v.category, "status": v.status,
           "detail": v.error or v.parse_error}
    if rm.judge_config is not None:  # a process with a judge adds it to every call's keys
        out["decided_by_judge"] = float(getattr(v, "decided_by", None) == "judge")
    return out


def _served_name(tokenizer: Any) -> str | None:
    """The name verl's reward servers serve the model under: the path its tokenizer was loaded from
    (verl starts vLLM/SGLang on that path, workers/rollout/vllm_rollout/vllm_async_server.py:456)."""
    name = getattr(tokenizer, "name_or_path", None)
    return name if isinstance(name, str) and name else None


def compute_score(data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                  extra_info: Any = None, *, data_sources: Any = None, solution_strs: Any = None,
                  ground_truths: Any = None, extra_infos: Any = None, reward_router_address: str | None = None,
                  reward_model_tokenizer: Any = None, **kwargs) -> Any:
    """verl `compute_score`. One sample (`extra_info`, from the reward loop or the naive manager) gives a
    dict; the batch manager's plural keywords (`extra_infos`, a numpy object array) give a list of
    dicts. The rollout is `extra_info["trajectory"]`. Keys: score, unparsed, error, p_success,
    category, status, detail. With `reward_router_address` ("host:port", verl's GenRM route) the
    verifier is the model verl serves there (`http://host:port/v1`), one RewardModel per address in
    the process, and nothing is loaded here; `compute_score_async` is the form verl awaits.

    Examples:
        >>> import tempfile, numpy as np
        >>> from adaptrubric_local import FakeEngine, load_trajectories, rewards
        >>> from adaptrubric_local.synth import synthesize
        >>> _ = rewards.configure(engine=FakeEngine())
        >>> data = synthesize(tempfile.mkdtemp(), n_tasks=1, candidates=2, size=(90, 200))
        >>> ts = load_trajectories(data).trajectories
        >>> out = rewards.compute_score(data_source="gui", solution_str="", ground_truth=None,
        ...                             extra_info={"trajectory": ts[0].to_dict()})
        >>> out["score"], out["status"], out["category"]
        (1.0, 'ok', 'create_modify')
        >>> batch = rewards.compute_score(
        ...     data_sources=np.array(["gui", "gui"], dtype=object), solution_strs=["", ""], ground_truths=[None, None],
        ...     extra_infos=np.array([{"trajectory": t.to_dict()} for t in ts], dtype=object))
        >>> [b["score"] for b in batch]
        [1.0, 1.0]
    """
    rm = (_rm.for_router(reward_router_address, _served_name(reward_model_tokenizer)) if reward_router_address
          else reward_model())
    # the batch manager's plural keywords; older callers passed lists in the singular ones
    batch = extra_infos if extra_infos is not None else extra_info if isinstance(extra_info, (list, tuple)) else None
    infos = list(batch) if batch is not None else [extra_info]
    items, bad = [], {}
    for i, info in enumerate(infos):
        try:
            items.append(_verl_traj(info))
        except ValueError as exc:
            bad[i] = Verdict(status="error", error=f"sample {i}: {exc}" if batch is not None else str(exc))
    good = iter(rm.score(items))
    out = [_verl_result(rm, bad[i] if i in bad else next(good)) for i in range(len(infos))]
    return out if batch is not None else out[0]


async def compute_score_async(data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                              extra_info: Any = None, **kwargs) -> Any:
    """`compute_score` as a coroutine, for verl's reward loop, which awaits an `async def` reward
    function in its event loop (experimental/reward_loop/reward_manager/naive.py:66-74) and runs a
    plain one in its thread pool. Scoring blocks on the verifier's batches, so it runs in a worker
    thread while the loop serves the other samples, whose calls share those batches.

    Examples:
        >>> import asyncio, tempfile
        >>> from adaptrubric_local import FakeEngine, load_trajectories, rewards
        >>> from adaptrubric_local.synth import synthesize
        >>> _ = rewards.configure(engine=FakeEngine())
        >>> data = synthesize(tempfile.mkdtemp(), n_tasks=1, candidates=1, size=(90, 200))
        >>> t = load_trajectories(data).trajectories[0]
        >>> out = asyncio.run(rewards.compute_score_async(data_source="gui", solution_str="", ground_truth=None,
        ...                                               extra_info={"trajectory": t.to_dict()}))
        >>> out["score"], out["status"]
        (1.0, 'ok')
    """
    return await asyncio.to_thread(compute_score, data_source, solution_str, ground_truth, extra_info, **kwargs)


# ----------------------------------------------------------------------------- OpenRLHF
def _openrlhf_result(rm: RewardModel, verdicts: Sequence[Verdict], **more: Any) -> dict:
    """What OpenRLHF takes back: rewards and scores (the same), `more`, and per-sample flags as `extra_logs`."""
    import torch

    rewards = torch.tensor([rm.number(v) for v in verdicts], dtype=torch.float32)
    logs = {f"{METRIC_PREFIX}_unparsed": torch.tensor([float(v.status == "unparsed") for v in verdicts]),
            f"{METRIC_PREFIX}_error": torch.tensor([float(v.status == "error") for v in verdicts])}
    if any(hasattr(v, "decided_by") for v in verdicts):  # a judge checks the verifier (RewardModel(judge=...))
        logs[f"{METRIC_PREFIX}_decided_by_judge"] = torch.tensor(
            [float(getattr(v, "decided_by", None) == "judge") for v in verdicts])
    return {"rewards": rewards, "scores": rewards.clone(), **more, "extra_logs": logs}


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any]) -> dict:
    """OpenRLHF `--reward.remote_url reward_func.py` with `--data.label_key`: each label carries a
    trajectory (a canonical dict, its JSON, or a path). Returns {"rewards", "scores", "extra_logs"}.
    OpenRLHF 0.11.2 calls this with one sample per call from many threads; the calls share batches.

    Examples:
        >>> import tempfile
        >>> from adaptrubric_local import FakeEngine, load_trajectories, rewards
        >>> from adaptrubric_local.synth import synthesize
        >>> _ = rewards.configure(engine=FakeEngine())
        >>> data = synthesize(tempfile.mkdtemp(), n_tasks=1, candidates=2, size=(90, 200))
        >>> trajs = load_trajectories(data).trajectories
        >>> out = rewards.reward_func(["q", "q"], ["p", "p"], [t.to_dict() for t in trajs])
        >>> out["rewards"].tolist(), out["extra_logs"]["adaptrubric_unparsed"].tolist()
        ([1.0, 1.0], [0.0, 0.0])
    """
    rm = reward_model()
    return _openrlhf_result(rm, rm.score(list(labels)))


async def openrlhf_final_step(trajectory: Any, environment_feedback: str = "") -> dict:
    """The last `step()` result of an OpenRLHF agent (`--train.agent_func_path`): the verifier's reward
    for this episode's own trajectory, `done=True`. Scored in a worker thread, so the event loop
    keeps serving the other rollouts (whose calls share the verifier's batches).

    Examples:
        >>> import asyncio, tempfile
        >>> from adaptrubric_local import FakeEngine, load_trajectories, rewards
        >>> from adaptrubric_local.synth import synthesize
        >>> _ = rewards.configure(engine=FakeEngine())
        >>> data = synthesize(tempfile.mkdtemp(), n_tasks=1, candidates=1, size=(90, 200))
        >>> t = load_trajectories(data).trajectories[0]
        >>> res = asyncio.run(rewards.openrlhf_final_step(t.to_dict()))
        >>> res["rewards"].item(), res["done"], res["extra_logs"]["adaptrubric_error"].item()
        (1.0, True, 0.0)
    """
    rm = reward_model()
    verdicts = await asyncio.to_thread(rm.score, [trajectory])
    return _openrlhf_result(rm, verdicts, environment_feedback=environment_feedback, done=True)
