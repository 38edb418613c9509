"""Building an engine from options: the one place outside the engine package that knows how. The
options are HFEngineConfig's fields, plus VLLMConfig's for `engine="vllm"` (their flags come from
flags.py, like every config's); `ENGINES` registers each in-process engine by name. Importing this
module does not import torch, transformers or vLLM: that happens in `build_engine`. Knows nothing
about rubrics, pipelines or files of trajectories.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


def _transformers(model: str, **options):
    from .hf import HFEngine, HFEngineConfig
    from .vllm_engine import VLLM_FIELDS

    stray = sorted(k for k in options if k in VLLM_FIELDS)
    if stray:
        raise ValueError(f"{', '.join(stray)}: option(s) of the vLLM engine; add engine='vllm' (--engine vllm) or "
                         "leave them out")
    return HFEngine(HFEngineConfig(model=model, **options))


def _vllm(model: str, **options):
    from .vllm_engine import VLLMEngine, VLLMEngineConfig

    return VLLMEngine(VLLMEngineConfig(model=model, **options))


ENGINES = {"transformers": _transformers, "vllm": _vllm}


@dataclass
class EngineChoice:
    """Which in-process engine runs the model."""

    engine: str = field(default="transformers", metadata={"common": "model and engine",
        "help": "transformers: transformers' generate; vllm: one in-process vllm.LLM (continuous batching, paged "
                "KV cache, prefix caching; pip install 'adaptrubric-local[vllm]')", "choices": list(ENGINES)})

    def __post_init__(self):
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")


def engine_config(model: Optional[str] = None, engine: str = "transformers", **options):
    """The config `build_engine` would run the engine with (HFEngineConfig, or VLLMEngineConfig for
    vLLM), validated, without importing torch or vLLM or loading anything: what a verdict file's
    settings record can be checked against before a model loads."""
    EngineChoice(engine)
    if not model:
        raise ValueError("no model given: pass --model (a hub id such as Qwen/Qwen3-VL-4B-Instruct, or a local "
                         "folder)")
    if engine == "vllm":
        from .vllm_engine import VLLMEngineConfig

        return VLLMEngineConfig(model=model, **options)
    from .hf_config import HFEngineConfig
    from .vllm_engine import VLLM_FIELDS

    stray = sorted(k for k in options if k in VLLM_FIELDS)
    if stray:
        raise ValueError(f"{', '.join(stray)}: option(s) of the vLLM engine; add engine='vllm' (--engine vllm) or "
                         "leave them out")
    return HFEngineConfig(model=model, **options)


def build_engine(model: Optional[str] = None, engine: str = "transformers", **options):
    """The in-process engine `engine` for `model` with HFEngineConfig (and, for vLLM, VLLMConfig)
    `options` (imports torch)."""
    EngineChoice(engine)
    if not model:
        raise ValueError("no model given: pass --model (a hub id such as Qwen/Qwen3-VL-4B-Instruct, or a local "
                         "folder)")
    return ENGINES[engine](model, **options)
