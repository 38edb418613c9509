"""`RewardModel`: the verifier as a reward, loaded once per process, safe to call from many threads.

    rm = RewardModel(model="Qwen/Qwen3-VL-4B-Instruct", reward="p_success", data_root="/data/rollouts")
    rm = RewardModel.from_config("reward.yaml")       # every option of `adaptrubric score`, one flat mapping
    rm = RewardModel(reward="p_success", calibration="calib.json")   # p_success_calibrated as the soft reward
    rm.rewards([traj_a, traj_b])                      # -> [1.0, None]  (None: unparsed or error, never 0/1)
    rm.score([traj_a, traj_b])                        # -> [Verdict, Verdict]

Trajectories may be `Trajectory` objects, canonical record dicts (or their JSON) or paths to
trajectory files. Relative screenshot paths resolve against `data_root` (default: the current
directory) and then `image_roots`; absolute paths are used as they are (by the service: only inside
those folders). A screenshot may also be the image itself, bytes or a `data:image/...;base64,` URL,
checked and kept in a temporary folder for the call (inline_images.py).

Every call from every thread goes through one scoring thread that gathers what is waiting into
engine batches (`Batcher`), so concurrent callers (verl's reward threads, OpenRLHF's rollout
threads) share batches and the route/cue cache, and the model is loaded once, under a lock, on
first use. Each distinct trajectory of a call is scored once. With `service_url` set nothing is
loaded here: trajectories are sent to `adaptrubric serve` (see serve.py), with the API key from the
environment and, with `inline_images`, the screenshots inside the request.

Knows nothing about RL frameworks (rewards.py) or HTTP servers (serve.py).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import queue
import threading
import time
import urllib.error
import urllib.request
import zlib
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from .engine.base import Engine
from .image_policy import adopt
from .inline_images import DEFAULT_MAX_PIXELS, ImageStore, data_url, is_inline
from .pipeline import AdaptRubric, PipelineConfig
from .types import Trajectory, Verdict

REWARD_MODES = ("binary", "p_success")
log = logging.getLogger("adaptrubric.rewards")


def default_model() -> str:
    """The engine's default checkpoint (one default for the CLI, the engine and the rewards)."""
    try:
        from .engine.hf_config import DEFAULT_MODEL  # torch-free home of the engine config, when present
    except ImportError:
        from .engine.hf import DEFAULT_MODEL
    return DEFAULT_MODEL


def engine_config_class():
    """HFEngineConfig (from its torch-free module when there is one)."""
    try:
        from .engine.hf_config import HFEngineConfig
    except ImportError:
        from .engine.hf import HFEngineConfig
    return HFEngineConfig


@dataclass
class RewardConfig:
    """How rewards are made from verdicts and where trajectories and the verifier live."""

    reward: str = field(default="binary", metadata={
        "help": "binary (SCORE 0/1) or p_success (P(SCORE=1) read from the logits; 'soft' is accepted)"})
    unparsed_reward: float = field(default=0.0, metadata={
        "help": "the number given to frameworks that need one for an unparsed or failed verdict (TRL gets None)"})
    data_root: Optional[str] = field(default=None, metadata={
        "help": "folder that relative screenshot paths resolve against (default: the current directory)"})
    image_roots: list[str] = field(default_factory=list, metadata={
        "help": "further folders tried, in order, for relative screenshot paths"})
    service_url: Optional[str] = field(default=None, metadata={
        "help": "URL(s) of `adaptrubric serve`, comma-separated; when set no model is loaded in this process"})
    service_timeout: float = field(default=600.0, metadata={"help": "seconds to wait for the service per request"})
    inline_images: bool = field(default=False, metadata={
        "help": "send screenshots to the service inside the request (data URLs) instead of as paths: for a "
                "service on another machine, without a shared file system"})
    api_key_env: str = field(default="ADAPTRUBRIC_API_KEY", metadata={
        "help": "environment variable holding the service's API key, sent as a bearer token (never put "
                "the key itself in a config file)"})
    max_image_pixels: int = field(default=DEFAULT_MAX_PIXELS, metadata={
        "help": "largest inline screenshot accepted, in pixels (giant images and decompression bombs are "
                "refused from the header)"})
    batch_window_ms: float = field(default=50.0, metadata={
        "help": "how long the scoring thread waits for more concurrent calls before running a batch"})
    max_batch: int = field(default=32, metadata={"help": "most trajectories per engine batch"})
    max_pending: Optional[int] = field(default=None, metadata={
        "help": "most trajectories waiting to be scored; more are refused (the service answers 503); None: no limit"})
    calibration: Optional[str] = field(default=None, metadata={
        "help": "a file from `adaptrubric calibrate`: verdicts get p_success_calibrated, which the p_success "
                "reward then uses"})

    def __post_init__(self):
        if self.reward == "soft":
            self.reward = "p_success"
        if self.reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {', '.join(REWARD_MODES)}, got {self.reward!r}")
        if isinstance(self.image_roots, str):
            self.image_roots = [self.image_roots]
        self.unparsed_reward = float(self.unparsed_reward)
        if self.max_batch < 1 or self.batch_window_ms < 0 or self.service_timeout <= 0:
            raise ValueError("max_batch must be >= 1, batch_window_ms >= 0 and service_timeout > 0")
        if self.max_pending is not None and self.max_pending < 1:
            raise ValueError(f"max_pending must be >= 1 or None, got {self.max_pending}")
        if self.max_image_pixels < 1:
            raise ValueError(f"max_image_pixels must be >= 1, got {self.max_image_pixels}")

    @property
    def root(self) -> Path:
        """The folder relative screenshot paths resolve against."""
        return Path(self.data_root) if self.data_root else Path.cwd()


def split_options(options: dict[str, Any], where: str = "options") -> tuple[dict, dict, dict]:
    """One flat mapping -> (RewardConfig, PipelineConfig, HFEngineConfig) keyword arguments; an unknown
    key is an error that names it and lists the known ones."""
    groups = [{f.name for f in dataclasses.fields(c)} for c in (RewardConfig, PipelineConfig, engine_config_class())]
    out: tuple[dict, dict, dict] = ({}, {}, {})
    for key, val in options.items():
        for names, dest in zip(groups, out):
            if key in names:
                dest[key] = val
                break
        else:
            known = sorted(set().union(*groups))
            raise ValueError(f"{where}: unknown option {key!r}; known options: {', '.join(known)}")
    return out


def load_options(path: str | Path) -> dict[str, Any]:
    """A flat option mapping from a YAML or JSON file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"reward config not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of option: value, got {type(data).__name__}")
    return data


# ----------------------------------------------------------------------------- trajectories in
def _inside(path: str | Path, roots: list[Path], where: str, what: str) -> Path:
    """`path` resolved, when it lies inside one of `roots` (symlinks followed); ValueError otherwise."""
    full = Path(path).resolve()
    allowed = [r.resolve() for r in roots]
    if not any(full == r or r in full.parents for r in allowed):
        raise ValueError(f"{where}: {what} {str(path)!r} lies outside the service's data_root and image_roots "
                         f"({', '.join(map(str, allowed))}): add its folder to image_roots "
                         "(serve --set 'image_roots=[DIR]') or send the screenshots inline (inline_images: true)")
    return full


def _resolve_shot(rel: str, roots: list[Path], where: str, confine: bool = False) -> str:
    if rel.startswith("file://"):
        rel = rel[len("file://"):]
    if os.path.isabs(rel):
        return str(_inside(rel, roots, where, "screenshot path")) if confine else rel
    tried = []
    for root in roots:
        root_r = root.resolve()
        full = (root_r / rel).resolve()
        if full != root_r and root_r not in full.parents:
            raise ValueError(f"{where}: screenshot path {rel!r} escapes {root_r}")
        if full.is_file():
            return str(full)
        tried.append(str(full))
    raise ValueError(f"{where}: screenshot not found: {rel!r} (tried {', '.join(tried)}; set data_root or image_roots)")


def _shot(value: Any, roots: list[Path], images: Optional[ImageStore], where: str, confine: bool) -> Any:
    """A step's screenshot as a local path: inline images go to `images`, paths are resolved."""
    if is_inline(value):
        if images is None:
            raise ValueError(f"{where}: an inline screenshot (bytes or data URL) where none is accepted")
        return images.put(value, where)
    return _resolve_shot(value, roots, where, confine) if isinstance(value, str) else value


def to_trajectory(obj: Any, cfg: RewardConfig, where: str = "trajectory",
                  images: Optional[ImageStore] = None, confine: bool = False) -> Trajectory:
    """A Trajectory from a Trajectory, a canonical dict (or its JSON), or a path to trajectory data.
    Screenshots given inline (bytes or data URLs) are checked and written to `images`. With `confine`
    (the service: requests come from elsewhere), absolute paths, like relative ones, must lie inside
    data_root or image_roots."""
    from .formats import load_trajectories
    from .formats.canonical import parse_record

    if isinstance(obj, Trajectory):
        return obj
    if isinstance(obj, (bytes, bytearray)):
        obj = obj.decode("utf-8")
    if isinstance(obj, str) and obj.lstrip().startswith("{"):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not valid JSON: {exc}") from None
    if isinstance(obj, dict):
        roots = [cfg.root, *map(Path, cfg.image_roots)]
        steps = obj.get("steps")
        if isinstance(steps, list):
            obj = {**obj, "steps": [
                {**s, "screenshot": _shot(s["screenshot"], roots, images, f"{where}, steps[{i}].screenshot", confine)}
                if isinstance(s, dict) and s.get("screenshot") is not None else s
                for i, s in enumerate(steps)]}
        return parse_record(obj, Path("/"), Path(f"<{where}>"), where)
    if isinstance(obj, (str, Path)):
        path = obj if os.path.isabs(str(obj)) else cfg.root / obj
        if confine:
            path = _inside(path, [cfg.root, *map(Path, cfg.image_roots)], where, "trajectory path")
        try:
            loaded = load_trajectories(path, image_roots=tuple(cfg.image_roots))
        except TypeError:  # a loader without image roots
            loaded = load_trajectories(path)
        if not loaded.trajectories:
            raise ValueError(f"{where}: no trajectory in {path}: {'; '.join(map(str, loaded.errors)) or 'empty'}")
        return loaded.trajectories[0]
    raise TypeError(f"{where}: expected a Trajectory, a canonical dict or a path, got {type(obj).__name__}")


def traj_key(t: Trajectory) -> str:
    """Identity of a trajectory's content (two equal rollouts are scored once)."""
    return json.dumps(t.to_dict(), sort_keys=True, ensure_ascii=False)


# ----------------------------------------------------------------------------- dynamic batching
class QueueFull(RuntimeError):
    """The batcher holds `max_pending` trajectories already."""


class Batcher:
    """One scoring thread fed by a queue: whatever arrives within `window_s` of the first waiting item
    (up to `max_batch`) is scored as one batch, each distinct trajectory once. Thread-safe; futures out."""

    def __init__(self, score: Callable[[list[Trajectory]], list[Verdict]], max_batch: int = 32,
                 window_s: float = 0.02, max_pending: Optional[int] = None):
        self._score = score
        self.max_batch, self.window_s, self.max_pending = max_batch, window_s, max_pending
        self._q: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self.pending = 0
        self.batches: list[int] = []  # size of every batch run (for tests and benchmarks)
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="adaptrubric-batcher", daemon=True)
        self._thread.start()

    def submit(self, trajs: Sequence[Trajectory]) -> list[Future]:
        """Queue trajectories; one future per trajectory, resolved with its Verdict."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the scorer is shut down")
            if self.max_pending is not None and self.pending + len(trajs) > self.max_pending:
                raise QueueFull(f"{self.pending} trajectories already waiting (limit {self.max_pending})")
            self.pending += len(trajs)
        futs = [Future() for _ in trajs]
        for t, f in zip(trajs, futs):
            self._q.put((t, f))
        return futs

    def _loop(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            batch = [item]
            deadline = time.monotonic() + self.window_s
            while len(batch) < self.max_batch:
                try:
                    nxt = self._q.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if nxt is None:
                    self._q.put(None)  # finish this batch, then stop
                    break
                batch.append(nxt)
            self._run(batch)

    def _run(self, batch: list[tuple[Trajectory, Future]]) -> None:
        groups: dict[str, list[Future]] = {}
        firsts: list[Trajectory] = []
        for t, f in batch:
            k = traj_key(t)
            if k not in groups:
                groups[k] = []
                firsts.append(t)
            groups[k].append(f)
        self.batches.append(len(firsts))
        try:
            verdicts = self._score(firsts)
            for t, v in zip(firsts, verdicts):
                for f in groups[traj_key(t)]:
                    f.set_result(dataclasses.replace(v))
        except BaseException as exc:  # the engine failed for the whole batch: every caller hears why
            for futs in groups.values():
                for f in futs:
                    if not f.done():
                        f.set_exception(exc)
        finally:
            with self._lock:
                self.pending -= len(batch)

    def close(self, timeout: Optional[float] = None) -> None:
        """Finish everything queued, then stop the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._q.put(None)
        self._thread.join(timeout)


# ----------------------------------------------------------------------------- the reward model
class RewardModel:
    """The AdaptRubric verifier as a reward function; see the module docstring."""

    def __init__(self, model: Optional[str] = None, *, engine: Optional[Engine] = None,
                 engine_factory: Optional[Callable[[], Engine]] = None, **options):
        opts = dict(options)
        if model is not None:
            opts["model"] = model
        reward_kw, pipe_kw, engine_kw = split_options(opts)
        engine_kw, pipe_kw = adopt(engine_kw.get("adapter"), engine_kw, pipe_kw, explicit=opts)  # the adapter's images
        self.config = RewardConfig(**reward_kw)
        self.pipeline_config = PipelineConfig(**pipe_kw)
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
        """Build from a flat YAML/JSON mapping of options (any RewardConfig, PipelineConfig or
        HFEngineConfig field); keyword `overrides` win over the file."""
        opts = load_options(path)
        split_options(opts, where=str(path))  # fail naming the file before anything loads
        return cls(**{**opts, **overrides})

    # ------------------------------------------------------------------ loading (once, under a lock)
    def _build_engine(self) -> Engine:
        if self._engine is not None:
            return self._engine
        if self._factory is not None:
            return self._factory()
        try:
            from .engine.build import build_engine
        except ImportError:
            build_engine = None
        if build_engine is not None:
            return build_engine(**self.engine_options)
        from .engine.hf import HFEngine

        return HFEngine(engine_config_class()(**self.engine_options))

    def load(self) -> AdaptRubric:
        """The pipeline, building the engine on first use (exactly once, whichever thread gets here first)."""
        if self._pipe is None:
            with self._load_lock:
                if self._pipe is None:
                    engine = self._build_engine()
                    self.loads += 1
                    pipe = AdaptRubric(engine, self.pipeline_config)
                    self._batcher = Batcher(lambda ts: self._calibrated(pipe.score(ts)),
                                            max_batch=self.config.max_batch,
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
                verdicts = [Verdict(status="error", error=str(exc)) for _ in items]
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
                verdicts = [Verdict(status="error", error=errors[i]) if t is None else _result(next(futs), t)
                            for i, t in enumerate(trajs)]
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


# ----------------------------------------------------------------------------- client of the service
class ServiceClient:
    """Sends trajectories to `adaptrubric serve`. With several URLs, a trajectory goes to the replica
    chosen by its instruction, so a GRPO group shares one replica's route/cue cache. The API key, read
    from the environment variable `api_key_env`, goes as a bearer token with every request. With
    `inline_images` the screenshots travel inside the request (data URLs); otherwise as absolute paths
    that the service must be able to read (a shared file system). Bytes travel inline either way."""

    def __init__(self, cfg: RewardConfig):
        self.urls = [u.strip().rstrip("/") for u in (cfg.service_url or "").split(",") if u.strip()]
        if not self.urls:
            raise ValueError("service_url is empty")
        self.timeout = cfg.service_timeout
        self.inline = cfg.inline_images
        key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"

    def _payload(self, obj: Any, cfg: RewardConfig, where: str) -> Any:
        if self.inline:
            return self._inline(obj, cfg, where)
        if isinstance(obj, Trajectory):
            obj = obj.to_dict()
        if isinstance(obj, (str, Path)) and not str(obj).lstrip().startswith("{") and not os.path.isabs(str(obj)):
            return str(cfg.root / obj)  # the service runs elsewhere: send absolute paths
        if isinstance(obj, dict) and isinstance(obj.get("steps"), list):
            return {**obj, "steps": [self._step_path(s, cfg) for s in obj["steps"]]}
        return obj

    @staticmethod
    def _step_path(s: Any, cfg: RewardConfig) -> Any:
        shot = s.get("screenshot") if isinstance(s, dict) else None
        if shot is None or (isinstance(shot, str) and shot[:5].lower() == "data:"):
            return s
        if is_inline(shot):  # bytes cannot travel in JSON as they are
            return {**s, "screenshot": data_url(shot)}
        if isinstance(shot, str) and not os.path.isabs(shot):
            return {**s, "screenshot": str(cfg.root / shot)}
        return s

    @staticmethod
    def _inline(obj: Any, cfg: RewardConfig, where: str) -> dict:
        """The record with every screenshot read here and sent as a data URL."""
        if isinstance(obj, (bytes, bytearray)):
            obj = obj.decode("utf-8")
        if isinstance(obj, str) and obj.lstrip().startswith("{"):
            obj = json.loads(obj)
        if isinstance(obj, Trajectory):
            obj = obj.to_dict()
        elif not isinstance(obj, dict):  # a path to trajectory data: load it here, where the files are
            obj = to_trajectory(obj, cfg, where).to_dict()
        steps = obj.get("steps")
        if not isinstance(steps, list):
            return obj  # the service names the problem
        roots = [cfg.root, *map(Path, cfg.image_roots)]
        out = []
        for i, s in enumerate(steps):
            shot = s.get("screenshot") if isinstance(s, dict) else None
            if shot is not None and (is_inline(shot) or isinstance(shot, str)):
                path = shot if is_inline(shot) else _resolve_shot(shot, roots, f"{where}, steps[{i}].screenshot")
                s = {**s, "screenshot": data_url(path)}
            out.append(s)
        return {**obj, "steps": out}

    def _instruction(self, obj: Any) -> str:
        if isinstance(obj, Trajectory):
            return obj.instruction
        if isinstance(obj, dict):
            return str(obj.get("instruction", ""))
        return str(obj)

    def post(self, url: str, body: dict) -> dict:
        """POST JSON, return JSON; a 503 (queue full) is retried with back-off."""
        data = json.dumps(body).encode("utf-8")
        delay = 0.2
        deadline = time.monotonic() + self.timeout
        while True:
            req = urllib.request.Request(url, data=data, headers=self._headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                if exc.code == 503 and time.monotonic() + delay < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                detail = exc.read().decode("utf-8", "replace")[:500]
                hint = ""
                if exc.code == 401:
                    hint = " (set the service's key in the environment variable named by api_key_env)"
                elif exc.code == 413:
                    hint = " (inline screenshots count: raise the service's --max-request-mb)"
                raise RuntimeError(f"reward service {url} answered {exc.code}: {detail}{hint}") from None
            except urllib.error.URLError as exc:
                raise RuntimeError(f"reward service {url} unreachable: {exc.reason}") from None

    def score(self, items: list[Any], cfg: RewardConfig) -> list[Verdict]:
        """Verdicts from the service, in order (requests to different replicas run one after another);
        an item that cannot be sent (a screenshot missing here) is an error verdict of its own."""
        out: list[Optional[Verdict]] = [None] * len(items)
        by_url: dict[int, list[tuple[int, Any]]] = {}
        for i, obj in enumerate(items):
            try:
                payload = self._payload(obj, cfg, f"item {i}")
            except (ValueError, OSError, TypeError) as exc:
                out[i] = Verdict(status="error", error=str(exc))
                continue
            by_url.setdefault(zlib.crc32(self._instruction(obj).encode()) % len(self.urls), []).append((i, payload))
        for u, batch in by_url.items():
            res = self.post(self.urls[u] + "/score", {"trajectories": [p for _, p in batch]})
            for (i, _), d in zip(batch, res["verdicts"]):
                out[i] = Verdict.from_dict(d)
        return out  # type: ignore[return-value]


# ----------------------------------------------------------------------------- one per process
_SHARED: dict[str, Any] = {"rm": None}
_SHARED_LOCK = threading.Lock()
CONFIG_ENV = "ADAPTRUBRIC_CONFIG"
URL_ENV = "ADAPTRUBRIC_SERVICE_URL"


def configure(config: Optional[str | Path | PipelineConfig] = None, **options) -> RewardModel:
    """Set the process-wide RewardModel from a config file and/or options (replacing any earlier one).
    A PipelineConfig may stand in for the file: its fields become options."""
    if isinstance(config, PipelineConfig):
        options = {**dataclasses.asdict(config), **options}
        config = None
    rm = RewardModel.from_config(config, **options) if config else RewardModel(**options)
    with _SHARED_LOCK:
        old, _SHARED["rm"] = _SHARED["rm"], rm
    if old is not None:
        old.close()
    return rm


def shared() -> RewardModel:
    """The process-wide RewardModel: the configured one, else built once from $ADAPTRUBRIC_CONFIG
    (a YAML/JSON file) and $ADAPTRUBRIC_SERVICE_URL, else the defaults."""
    rm = _SHARED["rm"]
    if rm is None:
        with _SHARED_LOCK:
            if _SHARED["rm"] is None:
                path = os.environ.get(CONFIG_ENV)
                extra = {"service_url": os.environ[URL_ENV]} if os.environ.get(URL_ENV) else {}
                _SHARED["rm"] = RewardModel.from_config(path, **extra) if path else RewardModel(**extra)
            rm = _SHARED["rm"]
    return rm
