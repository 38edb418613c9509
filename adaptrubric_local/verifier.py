"""`Verifier`: the package's Python front door. One object holds one engine and one AdaptRubric pipeline;
it scores trajectories (a list at once, or a stream batch by batch) and turns verdicts into rewards
(the package docstring shows its use). Every setting is a typed keyword argument; an option the chosen
engine does not read is a ValueError naming what to use instead. Also holds what `RewardModel`
(rewards/model.py) shares: the engine keywords and their `Args:` text (`KEYWORDS`,
`documents_keywords`), `resolve_engine`, `build` and `reward_value`. Knows nothing about files of
verdicts, RL frameworks or HTTP.
"""
from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from .distill.image_policy import adopt
from .engine.base import Engine
from .engine.build import engines
from .engine.hf_config import CPU_BATCH_TOKENS, DEFAULT_MODEL, HFEngineConfig
from .engine.options import NO_VALUE, refuse_unread, vllm_options
from .engine.remote import RemoteConfig, check_remote, remote_engine
from .engine.vllm_engine import VLLMOptions
from .formats import LoadResult
from .pipeline import AdaptRubric, PipelineConfig
from .scoring import error_id
from .types import Trajectory, Verdict

EngineConfig = HFEngineConfig | VLLMOptions | RemoteConfig
RewardMode = Literal["binary", "p_success"]


def _default(cls: type, name: str) -> Any:
    """A config field's default, as the keyword sentences below quote it."""
    return {f.name: f.default for f in dataclasses.fields(cls)}[name]


# The keyword options Verifier and RewardModel both take (None: not given): the type the signatures write
# and the `Args:` sentence both docstrings get (`documents_keywords`), defaults quoted from the configs.
KEYWORDS: dict[str, tuple[str, str]] = {
    "adapter": ("str | None", "A LoRA adapter folder (peft) loaded on top of `model`; its recorded image settings "
                              "are adopted unless given here or in `pipeline`."),
    "dtype": ("str | None", 'Weights\' dtype, "auto", "bf16", "fp16" or "fp32"; None: auto (bf16 on a GPU, fp32 on '
                            'the CPU).'),
    "device_map": ("str | None", f'transformers\' device_map (transformers engine only); None: '
                                 f'"{_default(HFEngineConfig, "device_map")}".'),
    "load_in_4bit": ("bool | None", "Load the weights in 4-bit nf4 with bitsandbytes (transformers engine only)."),
    "load_in_8bit": ("bool | None", "Load the weights in 8-bit with bitsandbytes (transformers engine only)."),
    "max_visual_tokens": ("int | None", "Visual-token budget per trajectory, e.g. 6144 for speed; None: the "
                                        "processor's own resolution, as in the paper."),
    "max_pixels": ("int | None", "Pixel cap per screenshot; None: the processor's."),
    "votes": ("int | None", "Samples per verifier call; above 1 the verdict is their majority vote (sampled at "
                            f"temperature {_default(HFEngineConfig, 'temperature')}); None: "
                            f"{_default(HFEngineConfig, 'votes')}, greedy."),
    "max_batch_size": ("int | None", "Most requests in one generate call (transformers engine only; vLLM's is "
                                     f"`max_num_seqs`); None: {_default(HFEngineConfig, 'max_batch_size')}."),
    "max_batch_tokens": ("int | None", "Padded tokens per generate call (transformers engine only); None: derived "
                                       f"from free GPU memory, {CPU_BATCH_TOKENS} on the CPU."),
    "gpu_memory_utilization": ("float | None", "Share of the GPU's memory vLLM takes for weights and KV cache "
                                               "(vllm engine only); None: "
                                               f"{_default(VLLMOptions, 'gpu_memory_utilization')}."),
    "max_num_seqs": ("int | None", "Most requests vLLM runs at once (vllm engine only); None: "
                                   f"{_default(VLLMOptions, 'max_num_seqs')}."),
    "max_model_len": ("int | None", "Context length per request, prompt plus reply (vllm engine only); None: the "
                                    "model's."),
    "openai_url": ("str | None", 'Run every model call on this OpenAI-compatible server, e.g. '
                                 '"http://host:8000/v1" (vLLM, SGLang, a hosted API); implies engine="openai".'),
}
KEYWORDS_MARK = "        <the engine keywords: verifier.KEYWORDS>\n"


def documents_keywords(cls: type) -> type:
    """Class decorator: the `Args:` line KEYWORDS_MARK of `cls`'s docstring becomes one entry per keyword
    of KEYWORDS, wrapped as the docstring's own entries are (what help(), IDEs and the reference show)."""
    if cls.__doc__:
        entries = [textwrap.fill(f"{name}: {text}", 108, initial_indent=" " * 8, subsequent_indent=" " * 12,
                                 break_on_hyphens=False, break_long_words=False)
                   for name, (_, text) in KEYWORDS.items()]
        cls.__doc__ = cls.__doc__.replace(KEYWORDS_MARK, "\n".join(entries) + "\n")
    return cls


# the engine options among them (engine/options.py says which engine reads each); openai_url picks the engine
NAMED_OPTIONS = tuple(k for k in KEYWORDS if k != "openai_url")


def named_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """The NAMED_OPTIONS of a constructor's arguments (its `locals()`), None where not given."""
    return {k: given[k] for k in NAMED_OPTIONS}


def spell(name: str, value: Any = NO_VALUE) -> str:
    """An option of engine/options.py's advice as a Python caller writes it: a keyword argument, or a field
    of engine_config."""
    if name in NAMED_OPTIONS or name in ("model", "engine", "openai_url"):
        return name if value is NO_VALUE else f"{name}={value!r}"
    cls = "VLLMOptions" if vllm_options([name]) else "RemoteConfig" if name.startswith("openai_") else "HFEngineConfig"
    return f"engine_config={cls}({name}={'...' if value is NO_VALUE else repr(value)})"


@documents_keywords
class Verifier:
    """The AdaptRubric verifier for GUI-agent trajectories: one model, loaded once.

    Construction loads the model (or connects to the server); `score` and `stream` run the paper's
    method (route the instruction to a task family, write instruction-grounded cues, select
    screenshots, ask the model for SCORE / EVIDENCE_SUFFICIENT / MISSING_EVIDENCE) in batches of
    `pipeline.trajectories_per_batch`. A trajectory that fails gets a Verdict with status "error",
    one whose answer does not parse a Verdict with status "unparsed"; neither stops the others.

    Args:
        model: The Qwen3-VL checkpoint: a hub id (e.g. "Qwen/Qwen3-VL-8B-Instruct") or a local
            folder; with `openai_url`, the served model name. None: Qwen/Qwen3-VL-4B-Instruct in
            process, the server's only model with `openai_url`; not read with an Engine instance.
        engine: "transformers" (the default: transformers' generate in this process), "vllm" (one
            in-process vllm.LLM; pip install 'adaptrubric-local[vllm]'), "openai" (an
            OpenAI-compatible server at `openai_url`), or an Engine instance used as it is (e.g.
            FakeEngine for tests).
        pipeline: The method's settings (router, rubric switches, screenshot budget, token caps,
            rubric bank); None: PipelineConfig(), the paper's method.
        <the engine keywords: verifier.KEYWORDS>
        engine_config: The engine's remaining settings: an HFEngineConfig (transformers), a
            VLLMOptions (vllm) or a RemoteConfig (openai); the named options above win over it.
    """

    def __init__(self, model: str | None = None, *, engine: str | Engine = "transformers",
                 pipeline: PipelineConfig | None = None, adapter: str | None = None,
                 dtype: str | None = None, device_map: str | None = None,
                 load_in_4bit: bool | None = None, load_in_8bit: bool | None = None,
                 max_visual_tokens: int | None = None, max_pixels: int | None = None,
                 votes: int | None = None, max_batch_size: int | None = None,
                 max_batch_tokens: int | None = None, gpu_memory_utilization: float | None = None,
                 max_num_seqs: int | None = None, max_model_len: int | None = None,
                 openai_url: str | None = None, engine_config: EngineConfig | None = None):
        named = named_options(locals())
        self.engine_name, self.engine_options, self.pipeline_config = resolve_engine(
            engine, model, named, openai_url=openai_url, engine_config=engine_config, pipeline=pipeline)
        self._own_engine = isinstance(engine, str)  # an Engine given is the caller's to close
        built = build(self.engine_options, self.pipeline_config) if isinstance(engine, str) else engine
        self.pipeline = AdaptRubric(built, self.pipeline_config)
        self.closed = False

    # ------------------------------------------------------------------ scoring
    def score(self, trajectories: Iterable[Trajectory] | LoadResult) -> list[Verdict]:
        """One Verdict per trajectory, in input order. Given what `load_trajectories` returned, the
        records it could not read follow as error verdicts naming file, record and field."""
        return list(self.stream(trajectories))

    def stream(self, trajectories: Iterable[Trajectory] | LoadResult) -> Iterator[Verdict]:
        """`score`, lazily: trajectories are taken from the iterable `pipeline.trajectories_per_batch`
        at a time and each batch's verdicts are yielded, in input order, once it is scored, so a file
        of millions never sits in memory at once."""
        if self.closed:
            raise RuntimeError("this Verifier is closed: make a new one to score more")
        loaded = trajectories if isinstance(trajectories, LoadResult) else None
        pending: dict[int, Verdict] = {}
        nxt = 0
        for ready in self.pipeline.iter_indexed(loaded.trajectories if loaded else trajectories):
            pending.update(ready)
            while nxt in pending:
                yield pending.pop(nxt)
                nxt += 1
        engine = self.pipeline.engine
        for e in loaded.errors if loaded else ():
            yield Verdict(id=error_id(e), status="error", error=str(e), bank_sha=self.pipeline.bank.sha,
                          model=engine.name if engine is not None else None)

    def rewards(self, verdicts: Iterable[Verdict], reward: RewardMode = "binary",
                calibration: Any = None, unparsed: float | None = None) -> list[float | None]:
        """One reward per verdict: SCORE as 1.0 / 0.0 (`reward="binary"`) or P(SCORE=1) read from the
        model's logits (`reward="p_success"`, through `calibration`, a file from `adaptrubric
        calibrate` or a loaded Calibration, when given). A verdict that did not parse or failed gets
        `unparsed` (None unless given: never a silent 0 or 1)."""
        cal = load_calibration(calibration)
        return [unparsed if x is None else x for x in (reward_value(v, reward, cal) for v in verdicts)]

    @property
    def stats(self) -> dict[str, Any]:
        """Calls, tokens and seconds per trajectory so far, and the engine's own counters."""
        return self.pipeline.summary()

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Release the engine (and with it the model's memory) unless it was given as an Engine
        instance; scoring afterwards is an error. Closing twice does nothing."""
        engine, self.closed = self.pipeline.engine, True
        if self._own_engine and engine is not None:
            self.pipeline.engine = None
            engine.close()

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------- shared with RewardModel
def resolve_engine(engine: Any, model: str | None, named: Mapping[str, Any], *, openai_url: str | None = None,
                   engine_config: Any = None, pipeline: PipelineConfig | None = None,
                   ) -> tuple[str, dict[str, Any], PipelineConfig]:
    """(engine name, flat engine options, pipeline config) for the arguments of Verifier or RewardModel:
    `named` holds the named engine options (None: not given), `engine_config` an engine config or a
    mapping of its fields. A named option the engine does not read is a ValueError naming the engine
    and what to use instead; an adapter's image settings are adopted where nothing set them."""
    given = {k: v for k, v in named.items() if v is not None}
    engine = "transformers" if engine is None else engine
    if not isinstance(engine, str):  # an Engine instance: nothing here configures it
        if given or openai_url or engine_config is not None:
            names = sorted(given) + ["openai_url"] * bool(openai_url) + ["engine_config"] * (engine_config is not None)
            raise ValueError(f"engine is an Engine instance ({type(engine).__name__}), which does not read "
                             f"{', '.join(names)}: configure the engine itself")
        return type(engine).__name__, {}, pipeline or PipelineConfig()
    if engine not in engines():
        raise ValueError(f"engine must be one of {', '.join(engines())} or an Engine instance, got {engine!r} (a "
                         "user's engine is registered with @register_engine: docs/architecture.md)")
    if not openai_url:  # the server's address may come in the engine's config
        openai_url = engine_config.get("openai_url") if isinstance(engine_config, Mapping) else getattr(
            engine_config, "openai_url", None)
    if openai_url:
        if engine == "vllm":
            raise ValueError("give one of engine='vllm' (vLLM in this process) and openai_url (a model server)")
        engine = "openai"
    elif engine == "openai":
        raise ValueError("engine='openai' needs openai_url, the server's address (e.g. http://host:8000/v1)")
    refuse_unread(engine, given, spell)
    options = {**_config_fields(engine, engine_config), **given}
    if engine == "openai":
        options["openai_url"] = openai_url
        if model:
            options["model"] = model
        else:
            options.pop("model", None)
        check_remote(options)  # fail now, not at the first verdict
    else:
        options["model"] = model or options.get("model") or DEFAULT_MODEL
        options["engine"] = engine
    pipe = pipeline or PipelineConfig()
    default = PipelineConfig()  # the pipeline's settings that differ from the defaults count as set
    explicit = set(given) | {f.name for f in dataclasses.fields(pipe)
                             if getattr(pipe, f.name) != getattr(default, f.name)}
    options, pipe_kw = adopt(options.get("adapter"), options, dataclasses.asdict(pipe), explicit=explicit)
    if engine != "openai":  # build its config now (no model library imported): a bad value fails here, named
        from .engine.build import engine_config

        engine_config(**{**options, "engine": engine})
    return engine, options, PipelineConfig(**pipe_kw)


def _config_fields(engine: str, cfg: Any) -> dict[str, Any]:
    """The fields of an engine config (a mapping passes as it is) for engine `engine`, checked to be its kind."""
    if cfg is None:
        return {}
    if isinstance(cfg, Mapping):
        return dict(cfg)
    kinds = {"vllm": VLLMOptions, "openai": RemoteConfig, "transformers": HFEngineConfig}
    if engine not in kinds:
        raise TypeError(f"engine_config for engine={engine!r} (a registered engine) must be a mapping of its options, "
                        f"got {type(cfg).__name__}")
    kind = next((k for k, c in kinds.items() if isinstance(cfg, c)), None)
    if kind is None:
        raise TypeError("engine_config must be an HFEngineConfig, VLLMOptions or RemoteConfig, got "
                        f"{type(cfg).__name__}")
    if kind != engine:
        fix = f" or add engine={kind!r}" if kind != "openai" else " or give openai_url"
        raise ValueError(f"engine_config is a {type(cfg).__name__}, which engine={engine!r} does not read; pass a "
                         f"{kinds[engine].__name__}{fix}")
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name != "engine"}


def build(options: Mapping[str, Any], pipeline: PipelineConfig) -> Engine:
    """The engine for `resolve_engine`'s options (loads the model, or checks the server)."""
    options = dict(options)
    if options.get("openai_url"):  # the cap covers every call the pipeline makes, as the CLI's does
        return remote_engine({**options, "max_new_tokens": max(
            pipeline.verify_max_new_tokens, pipeline.cue_max_new_tokens, pipeline.route_max_new_tokens)})
    from .engine.build import build_engine

    if options.get("engine") == "vllm" and options.get("limit_mm_per_prompt") is None:
        options["limit_mm_per_prompt"] = pipeline.max_images  # vLLM reserves memory per image
    return build_engine(**options)


def load_calibration(calibration: Any):
    """A Calibration from a path or a loaded one; None stays None."""
    if calibration is None or not isinstance(calibration, (str, Path)):
        return calibration
    from .evaluation.calibration import load

    return load(calibration)[0]


def reward_value(v: Verdict, reward: str = "binary", calibration: Any = None) -> float | None:
    """The reward of one verdict: None unless it parsed. "binary": SCORE; "p_success" ("soft"):
    P(SCORE=1), through `calibration` when given, SCORE when the engine reported no probability."""
    reward = "p_success" if reward == "soft" else reward
    if reward not in ("binary", "p_success"):
        raise ValueError(f"reward must be 'binary' or 'p_success', got {reward!r}")
    if v.status != "ok" or v.score is None:
        return None
    if reward == "p_success":
        p = calibration.apply(v.p_success) if calibration is not None else v.p_success
        return float(p if p is not None else v.score)
    return float(v.score)
