"""`RewardModel`: the verifier as a reward, loaded once per process, safe to call from many threads.

    rm = RewardModel(model="Qwen/Qwen3-VL-4B-Instruct", reward="p_success", data_root="/data/rollouts")
    rm = RewardModel.from_config("reward.yaml")       # every option of `adaptrubric score`, one flat mapping
    rm = RewardModel(reward="p_success", calibration="calib.json")   # p_success_calibrated as the soft reward
    rm = RewardModel(openai_url="http://vllm:8000/v1", model="Qwen/Qwen3-VL-8B-Instruct")   # on a server
    rm = RewardModel(model="Qwen/Qwen3-VL-8B-Instruct", engine="vllm", max_model_len=32768)   # vLLM in process
    rm.rewards([traj_a, traj_b])                      # -> [1.0, None]  (None: unparsed or error, never 0/1)
    rm.score([traj_a, traj_b])                        # -> [Verdict, Verdict]

What it may be given: reward_inputs.py. Its options: reward_config.py (a LoRA adapter's image
settings are adopted, image_policy.py). Every call from every thread goes through one scoring thread
that gathers what is waiting into engine batches (batcher.py), so concurrent callers share batches
and the route/cue cache, and the model is loaded once, under a lock, on first use. With
`service_url` set nothing is loaded here: trajectories go to `adaptrubric serve` (service_client.py).
With `openai_url` set nothing is loaded either: the method runs here and every model call goes to that
OpenAI-compatible server (engine/remote.py; `model` is the served name, found on the server when omitted).

Knows nothing about RL frameworks (rewards.py) or HTTP servers (serve.py).
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from .batcher import Batcher
from .engine.base import Engine
from .engine.remote import check_remote, is_remote, remote_engine
from .image_policy import adopt
from .inline_images import ImageStore
from .pipeline import AdaptRubric, PipelineConfig
from .reward_config import RewardConfig, default_model, load_options, split_options
from .reward_inputs import item_id, to_trajectory, traj_key
from .service_client import ServiceClient
from .types import Trajectory, Verdict

log = logging.getLogger("adaptrubric.rewards")


class RewardModel:
    """The AdaptRubric verifier as a reward function; see the module docstring."""

    def __init__(self, model: Optional[str] = None, *, engine: Optional[Engine | str] = None,
                 engine_factory: Optional[Callable[[], Engine]] = None, **options):
        """`engine`: an Engine to use as it is, or the name of the in-process engine to build
        ("transformers", the default, or "vllm": a reward config's `engine:` key)."""
        opts = dict(options)
        if isinstance(engine, str):
            opts["engine"], engine = engine, None
        if model is not None:
            opts["model"] = model
        reward_kw, pipe_kw, engine_kw = split_options(opts)
        engine_kw, pipe_kw = adopt(engine_kw.get("adapter"), engine_kw, pipe_kw, explicit=opts)  # the adapter's images
        self.config = RewardConfig(**reward_kw)
        self.pipeline_config = PipelineConfig(**pipe_kw)
        if is_remote(engine_kw):  # fail now, not at the first reward; a server names its model when not given
            if engine_kw.get("engine", "transformers") != "transformers":
                raise ValueError("give one of engine='vllm' (vLLM in this process) and openai_url (a model server)")
            check_remote(engine_kw)
            if self.config.service_url:
                raise ValueError("give one of service_url (an `adaptrubric serve`) and openai_url (a model server)")
        else:
            engine_kw.setdefault("model", default_model())
        self.engine_options = engine_kw
        self._engine, self._factory = engine, engine_factory
        self._pipe: Optional[AdaptRubric] = None
        self._batcher: Optional[Batcher] = None
        self._load_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self.loads = 0
        self._counts = {"trajectories": 0, "ok": 0, "unparsed": 0, "errors": 0, "p_success_missing": 0}
        self._client = ServiceClient(self.config) if self.config.service_url else None
        self.calibration, self.provenance = None, {}
        if self.config.calibration:  # read now: a bad file fails before any model loads
            from .evaluation.calibration import load as load_calibration

            self.calibration, prov = load_calibration(self.config.calibration)
            self.provenance["calibration"] = prov

    @classmethod
    def from_config(cls, path: str | Path, **overrides) -> "RewardModel":
        """Build from a flat YAML/JSON mapping of options (any RewardConfig, PipelineConfig,
        HFEngineConfig or RemoteConfig field); keyword `overrides` win over the file."""
        opts = load_options(path)
        split_options(opts, where=str(path))  # fail naming the file before anything loads
        return cls(**{**opts, **overrides})

    # ------------------------------------------------------------------ loading (once, under a lock)
    def _build_engine(self) -> Engine:
        if self._engine is not None:
            return self._engine
        if self._factory is not None:
            return self._factory()
        if is_remote(self.engine_options):  # the cap covers every call the pipeline makes, as the CLI's does
            c = self.pipeline_config
            cap = max(c.verify_max_new_tokens, c.cue_max_new_tokens, c.route_max_new_tokens)
            return remote_engine({**self.engine_options, "max_new_tokens": cap})
        from .engine.build import build_engine

        options = dict(self.engine_options)
        if options.get("engine") == "vllm" and options.get("limit_mm_per_prompt") is None:
            options["limit_mm_per_prompt"] = self.pipeline_config.max_images  # vLLM reserves memory per image
        return build_engine(**options)

    def load(self) -> AdaptRubric:
        """The pipeline, building the engine on first use (exactly once, whichever thread gets here first)."""
        if self._pipe is None:
            with self._load_lock:
                if self._pipe is None:
                    engine = self._build_engine()
                    self.loads += 1
                    pipe = AdaptRubric(engine, self.pipeline_config)
                    self._batcher = Batcher(lambda ts: self._calibrated(pipe.score(ts)),
                                            max_batch=self.config.max_batch_trajectories,
                                            window_s=self.config.batch_window_ms / 1000,
                                            max_pending=self.config.max_pending)
                    self._pipe = pipe
        return self._pipe

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
                verdicts = [Verdict(id=item_id(obj, f"item {i}"), status="error", error=str(exc))
                            for i, obj in enumerate(items)]
            self._calibrated(verdicts)
        else:
            with ImageStore(self.config.max_image_pixels) as images:  # inline screenshots, for this call
                trajs: list[Optional[Trajectory]] = []
                errors: dict[int, str] = {}
                for i, obj in enumerate(items):
                    try:
                        trajs.append(to_trajectory(obj, self.config, f"item {i}", images))
                    except Exception as exc:  # one bad rollout must not sink the batch
                        trajs.append(None)
                        errors[i] = str(exc)
                good = [t for t in trajs if t is not None]
                futs = iter(self.submit(good)) if good else iter(())
                verdicts = [Verdict(id=item_id(items[i], f"item {i}"), status="error", error=errors[i]) if t is None
                            else _result(next(futs), t) for i, t in enumerate(trajs)]
        self._count(verdicts)
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
        """Set p_success_calibrated when a calibration is configured (verdicts from a service too)."""
        if self.calibration is not None:
            for v in verdicts:
                v.p_success_calibrated = self.calibration.apply(v.p_success)
        return verdicts

    def value(self, v: Verdict) -> Optional[float]:
        """The reward of one verdict: None unless it parsed. The p_success reward takes the calibrated
        probability when a calibration is configured."""
        if v.status != "ok" or v.score is None:
            return None
        if self.config.reward == "p_success":
            p = v.p_success_calibrated if self.calibration is not None else v.p_success
            if p is not None:
                return float(p)
        return float(v.score)

    def rewards(self, items: Sequence[Any]) -> list[Optional[float]]:
        """One reward per item (binary or p_success); None for unparsed or failed verdicts."""
        return [self.value(v) for v in self.score(items)]

    def number(self, v: Verdict) -> float:
        """The reward as a number, `unparsed_reward` when the verdict did not parse."""
        x = self.value(v)
        return self.config.unparsed_reward if x is None else x

    def _count(self, verdicts: Iterable[Verdict]) -> None:
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
        return out

    def close(self) -> None:
        """Finish queued work, stop the scoring thread, release the engine."""
        if self._batcher is not None:
            self._batcher.close()
        if self._pipe is not None and self._pipe.engine is not None and self._engine is None:
            self._pipe.engine.close()


def _result(fut: Future, t: Trajectory) -> Verdict:
    """The future's verdict; an engine failure for the whole batch becomes this item's error verdict."""
    try:
        return fut.result()
    except Exception as exc:
        log.warning("scoring %s failed: %s", t.id, exc)
        return Verdict(id=t.id, status="error", error=f"record {t.id}: {type(exc).__name__}: {exc}")
