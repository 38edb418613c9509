"""`RewardModel`: the verifier as a reward, loaded once per process, safe to call from many threads.

    rm = RewardModel(model="Qwen/Qwen3-VL-4B-Instruct", reward="p_success", data_root="/data/rollouts")
    rm = RewardModel.from_config("reward.yaml")       # every option of `adaptrubric score`, one flat mapping
    rm = RewardModel(engine="vllm", pipeline=PipelineConfig(router="rules"), max_num_seqs=32)
    rm = RewardModel(reward="p_success", calibration="calib.json")   # p_success_calibrated as the soft reward
    rm = RewardModel(openai_url="http://vllm:8000/v1", model="Qwen/Qwen3-VL-8B-Instruct")   # on a server
    rm = RewardModel(model="Qwen/Qwen3-VL-8B-Instruct", engine="vllm", max_model_len=32768)   # vLLM in process
    rm.rewards([traj_a, traj_b])                      # -> [1.0, None]  (None: unparsed or error, never 0/1)
    rm.score([traj_a, traj_b])                        # -> [Verdict, Verdict]

Its options are Verifier's (verifier.py) plus RewardConfig's (rewards/config.py), also as one flat
mapping (`from_options`, `from_config`). Every call from every thread goes through one scoring thread
(rewards/batcher.py), so concurrent callers share batches and the route/cue cache; the model loads once,
under a lock, on first use. With `service_url` (rewards/client.py) or `openai_url` (engine/remote.py)
nothing is loaded here.

Knows nothing about RL frameworks (rewards/) or HTTP servers (rewards/serve.py).
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any

from ..engine.base import Engine
from ..pipeline import AdaptRubric, PipelineConfig
from ..types import Trajectory, Verdict
from ..verifier import (
    NAMED_OPTIONS,
    EngineConfig,
    build,
    documents_keywords,
    named_options,
    resolve_engine,
    reward_value,
)
from .batcher import Batcher
from .child import check_gpus_visible, portable_options
from .client import ServiceClient
from .config import RewardConfig, load_options, split_options
from .images import DEFAULT_MAX_PIXELS, ImageStore
from .inputs import item_error, load_items, traj_key

log = logging.getLogger("adaptrubric.rewards")


@documents_keywords
class RewardModel:
    """The AdaptRubric verifier as a reward function: a `Verifier` (verifier.py) whose model loads on
    first use, plus a scoring thread that batches concurrent calls, an optional calibration, and the
    mapping of verdicts to rewards. It takes what RL frameworks hand over (rewards/inputs.py): rollout
    dicts, JSON lines, file paths or Trajectory objects. The engine arguments are Verifier's.

    Args:
        model: As Verifier's: the checkpoint, or the served name with `openai_url`; None: the default
            checkpoint (the server's only model with `openai_url`).
        engine: As Verifier's: "transformers", "vllm", "openai" or an Engine instance used as it is.
        pipeline: The method's settings; None: PipelineConfig(), the paper's method.
        <the engine keywords: verifier.KEYWORDS>
        engine_config: As Verifier's: an HFEngineConfig, VLLMOptions or RemoteConfig for the rest.
        reward: "binary" (SCORE 0/1) or "p_success" (P(SCORE=1) from the logits; "soft" is accepted).
        unparsed_reward: The number `number()` gives for an unparsed or failed verdict (`rewards()`
            gives None).
        calibration: A file from `adaptrubric calibrate`: verdicts get p_success_calibrated, which
            the p_success reward then uses.
        data_root: The folder relative screenshot paths resolve against; None: the current directory.
        image_roots: Further folders tried, in order, for relative screenshot paths.
        service_url: URL(s) of `adaptrubric serve`, comma-separated: nothing is loaded here, the
            trajectories are scored there.
        service_timeout: Seconds to wait for the service per request.
        inline_images: Send screenshots to the service inside the request (data URLs) instead of
            as paths, for a service without a shared file system.
        api_key_env: The environment variable holding the service's API key.
        max_image_pixels: The largest inline screenshot accepted, in pixels.
        batch_window_ms: How long the scoring thread waits for more concurrent calls before it runs
            a batch.
        max_batch_trajectories: The most trajectories the scoring thread gathers into one batch.
        max_pending: The most trajectories waiting to be scored, more being refused; None: no limit.
        engine_factory: Called once, on first use, to make the engine (instead of building it from
            the options above).
        judge: A judge that checks this verifier (the student): a CascadeConfig or a mapping of its
            fields (judge_url + judge_name or judge_model, escalate_band, cascade_band, spot_check,
            warn_below, ...; docs/student-judge.md). Escalated and spot-checked trajectories are scored
            by the judge, whose verdict becomes the reward; `stats["cascade"]` holds the live agreement.
        judge_engine: The judge's engine as an instance (instead of judge_url/judge_model).
    """

    def __init__(self, model: str | None = None, *, engine: str | Engine | None = "transformers",
                 pipeline: PipelineConfig | None = None, adapter: str | None = None,
                 dtype: str | None = None, device_map: str | None = None,
                 load_in_4bit: bool | None = None, load_in_8bit: bool | None = None,
                 max_visual_tokens: int | None = None, max_pixels: int | None = None,
                 votes: int | None = None, max_batch_size: int | None = None,
                 max_batch_tokens: int | None = None, gpu_memory_utilization: float | None = None,
                 max_num_seqs: int | None = None, max_model_len: int | None = None,
                 openai_url: str | None = None, engine_config: EngineConfig | None = None,
                 reward: str = "binary", unparsed_reward: float = 0.0, calibration: str | None = None,
                 data_root: str | None = None, image_roots: Sequence[str] = (),
                 service_url: str | None = None, service_timeout: float = 600.0, inline_images: bool = False,
                 api_key_env: str = "ADAPTRUBRIC_API_KEY", max_image_pixels: int = DEFAULT_MAX_PIXELS,
                 batch_window_ms: float = 50.0, max_batch_trajectories: int = 32, max_pending: int | None = None,
                 engine_factory: Callable[[], Engine] | None = None, judge: Any = None,
                 judge_engine: Engine | None = None):
        self._options = {k: v for k, v in locals().items() if k != "self"}  # what a pickled copy is rebuilt from
        self.config = RewardConfig(
            reward=reward, unparsed_reward=unparsed_reward, calibration=calibration, data_root=data_root,
            image_roots=list(image_roots), service_url=service_url, service_timeout=service_timeout,
            inline_images=inline_images, api_key_env=api_key_env, max_image_pixels=max_image_pixels,
            batch_window_ms=batch_window_ms, max_batch_trajectories=max_batch_trajectories, max_pending=max_pending)
        named = named_options(locals())
        instance = engine if engine is not None and not isinstance(engine, str) else None
        self.engine_name, self.engine_options, self.pipeline_config = resolve_engine(
            engine, model, named, openai_url=openai_url, engine_config=engine_config, pipeline=pipeline)
        if self.engine_options.get("openai_url") and self.config.service_url:
            raise ValueError("give one of service_url (an `adaptrubric serve`) and openai_url (a model server)")
        self._engine, self._factory = instance, engine_factory
        from ..cascade.config import judge_config

        self.judge_config, self._judge_engine, self._live = judge_config(judge, judge_engine), judge_engine, None
        self._pipe: AdaptRubric | None = None
        self._batcher: Batcher | None = None
        self._load_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self.loads = 0
        self._counts = {"trajectories": 0, "ok": 0, "unparsed": 0, "errors": 0, "p_success_missing": 0}
        self._client = ServiceClient(self.config) if self.config.service_url else None
        self.calibration, self.provenance = None, {}
        if self.config.calibration:  # read now: a bad file fails before any model loads
            from ..evaluation.calibration import load as load_calibration

            self.calibration, prov = load_calibration(self.config.calibration)
            self.provenance["calibration"] = prov

    @classmethod
    def from_options(cls, options: Mapping[str, Any], where: str = "options", **overrides: Any) -> RewardModel:
        """Build from one flat mapping of options, as a reward.yaml or `serve`'s flags give them (any
        RewardConfig, PipelineConfig, HFEngineConfig, VLLMOptions or RemoteConfig field, and `engine`);
        an unknown key is a ValueError naming it and `where`. `overrides` (keyword arguments of the
        constructor, e.g. `engine=FakeEngine()`, which leaves the mapping's engine options out) win over
        the mapping."""
        from ..cascade.config import JUDGE_FIELDS

        options = dict(options)
        ctor = {k: options.pop(k) for k in ("pipeline", "engine_config", "engine_factory", "judge", "judge_engine")
                if k in options}
        judge = {k: options.pop(k) for k in list(options) if k in JUDGE_FIELDS}  # a reward.yaml's judge keys
        if judge:
            base = ctor.get("judge")
            base = dataclasses.asdict(base) if dataclasses.is_dataclass(base) else dict(base or {})
            ctor["judge"] = {**base, **judge}
        reward_kw, pipe_kw, engine_kw = split_options(options, where=where)
        model, engine = engine_kw.pop("model", None), engine_kw.pop("engine", None)
        given = overrides.get("engine", engine)
        if given is not None and not isinstance(given, str):  # an Engine instance: the mapping's engine options
            model, engine_kw = None, {}                          # (a config shared with real runs) are not its
        named = {k: engine_kw.pop(k) for k in list(engine_kw) if k in NAMED_OPTIONS}
        kw: dict[str, Any] = dict(reward_kw, **named, model=model, engine=engine,
                                  pipeline=PipelineConfig(**pipe_kw) if pipe_kw else None,
                                  engine_config=engine_kw or None)
        return cls(**{**kw, **ctor, **overrides})

    @classmethod
    def from_config(cls, path: str | Path, **overrides) -> RewardModel:
        """Build from a flat YAML/JSON mapping of options (any RewardConfig, PipelineConfig,
        HFEngineConfig, VLLMOptions or RemoteConfig field); keys of `overrides` win over the file's."""
        return cls.from_options({**load_options(path), **overrides}, where=str(path))

    # ------------------------------------------------------------------ loading (once, under a lock)
    def __reduce__(self) -> tuple:
        """Pickled as its options and rebuilt unloaded where it is unpickled (rewards/child.py): TRL's
        AsyncGRPOTrainer sends reward functions to a spawned child."""
        return partial(type(self), **portable_options(type(self).__name__, self._options)), ()

    def load(self) -> AdaptRubric:
        """The pipeline, building the engine on first use (exactly once, whichever thread gets here first)."""
        if self._pipe is None:
            with self._load_lock:
                if self._pipe is None:
                    if self._engine is None and self._factory is None:
                        check_gpus_visible(self.engine_options)
                    engine = (self._engine if self._engine is not None else self._factory() if self._factory is not None
                              else build(self.engine_options, self.pipeline_config))
                    self.loads += 1
                    pipe = AdaptRubric(engine, self.pipeline_config)
                    score = pipe.score
                    if self.judge_config is not None:  # the student answers, the judge checks (cascade/live.py)
                        from ..cascade.live import LiveCascade

                        self._live = LiveCascade.build(pipe, self.judge_config, self._judge_engine)
                        score = self._live.score
                    self._batcher = Batcher(lambda ts: self._calibrated(score(ts)),
                                            max_batch=self.config.max_batch_trajectories,
                                            window_s=self.config.batch_window_ms / 1000,
                                            max_pending=self.config.max_pending)
                    self._pipe = pipe
        return self._pipe

    @property
    def loaded(self) -> bool:
        """Whether the engine is built (it is on first use)."""
        return self._pipe is not None

    @property
    def pending(self) -> int:
        """Trajectories waiting for the scoring thread (0 before it starts)."""
        return self._batcher.pending if self._batcher is not None else 0

    @property
    def batcher(self) -> Batcher:
        """The scoring thread (started on first use)."""
        self.load()
        assert self._batcher is not None
        return self._batcher

    # ------------------------------------------------------------------ scoring
    def score(self, items: Sequence[Any]) -> list[Verdict]:
        """One Verdict per item, in order; an item that cannot be read becomes an error verdict."""
        items = list(items)
        if self._client is not None:
            try:
                verdicts = self._client.score(items, self.config)
            except RuntimeError as exc:  # counted and reported as errors; the trainer's metrics show the rate
                log.warning("%s", exc)
                verdicts = [item_error(obj, i, str(exc)) for i, obj in enumerate(items)]
            verdicts = self._calibrated(verdicts)
        else:
            with ImageStore(self.config.max_image_pixels) as images:  # inline screenshots, for this call
                trajs, verdicts = load_items(items, self.config, images)
                futs = self.submit([t for _, t in trajs]) if trajs else []
                for (i, t), fut in zip(trajs, futs):
                    try:
                        verdicts[i] = fut.result()
                    except Exception as exc:  # an engine failure for the whole batch: this item's error verdict
                        log.warning("scoring %s failed: %s", t.id, exc)
                        verdicts[i] = Verdict(id=t.id, status="error",
                                              error=f"record {t.id}: {type(exc).__name__}: {exc}")
        self.count_verdicts(verdicts)
        return verdicts

    def submit(self, trajs: Sequence[Trajectory]) -> list[Future]:
        """Queue loaded trajectories for the scoring thread; distinct ones of a call are scored once."""
        firsts: dict[str, Trajectory] = {}
        keys = [traj_key(t) for t in trajs]
        for k, t in zip(keys, trajs):
            firsts.setdefault(k, t)
        futs = dict(zip(firsts, self.batcher.submit(list(firsts.values()))))
        if len(firsts) == len(trajs):
            return [futs[k] for k in keys]
        out = []
        for k in keys:  # duplicates get their own copy of the verdict
            f: Future = Future()
            futs[k].add_done_callback(lambda src, dst=f: dst.set_exception(src.exception()) if src.exception()
                                      else dst.set_result(dataclasses.replace(src.result())))
            out.append(f)
        return out

    def _calibrated(self, verdicts: list[Verdict]) -> list[Verdict]:
        """The verdicts with p_success_calibrated when a calibration is configured (from a service too)."""
        cal = self.calibration
        if cal is None:
            return verdicts
        return [dataclasses.replace(v, p_success_calibrated=cal.apply(v.p_success)) for v in verdicts]

    def value(self, v: Verdict) -> float | None:
        """The reward of one verdict: None unless it parsed. The p_success reward takes the calibrated
        probability when a calibration is configured."""
        return reward_value(v, self.config.reward, self.calibration)

    def rewards(self, items: Sequence[Any]) -> list[float | None]:
        """One reward per item (binary or p_success); None for unparsed or failed verdicts."""
        return [self.value(v) for v in self.score(items)]

    def number(self, v: Verdict) -> float:
        """The reward as a number, `unparsed_reward` when the verdict did not parse."""
        x = self.value(v)
        return self.config.unparsed_reward if x is None else x

    def count_verdicts(self, verdicts: Iterable[Verdict]) -> None:
        """Add verdicts to `stats`' counts: `score` does, and so does a caller that scored through `submit`."""
        with self._stats_lock:
            for v in verdicts:
                c = self._counts
                c["trajectories"] += 1
                c[{"ok": "ok", "unparsed": "unparsed"}.get(v.status, "errors")] += 1
                if v.status == "ok" and self.config.reward == "p_success" and v.p_success is None:
                    c["p_success_missing"] += 1

    @property
    def stats(self) -> dict[str, Any]:
        """Verdict counts and rates since start, plus the pipeline's call and token accounting."""
        with self._stats_lock:
            out: dict[str, Any] = dict(self._counts)
        n = max(1, out["trajectories"])
        out.update(unparsed_rate=out["unparsed"] / n, error_rate=out["errors"] / n, loads=self.loads)
        if self.provenance:
            out["provenance"] = self.provenance
        if self._pipe is not None:
            for _ in range(5):  # the scoring thread may be updating the counters; retry the snapshot
                try:
                    out["pipeline"] = self._pipe.summary()
                    break
                except RuntimeError:
                    time.sleep(0.001)
            out["batches"] = len(self._batcher.batches) if self._batcher else 0
        if self._live is not None:
            out["cascade"] = self._live.stats()
        return out

    def cascade_stats(self) -> dict[str, Any] | None:
        """The judge's live figures (cascade/live.py), or None without a judge or before the first call."""
        return self._live.stats() if self._live is not None else None

    def close(self) -> None:
        """Finish queued work, stop the scoring thread, release the engine."""
        if self._batcher is not None:
            self._batcher.close()
        if self._pipe is not None and self._pipe.engine is not None and self._engine is None:
            self._pipe.engine.close()
        if self._live is not None and self._judge_engine is None:
            self._live.close()

    def __enter__(self) -> RewardModel:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

