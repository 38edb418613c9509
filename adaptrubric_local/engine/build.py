"""Building an engine from options: the one place outside the engine package that knows how. The
in-process engines are registered here with engine/options.py's `register_engine`, as a user's are,
each naming the options it reads; the transformers engine's options are HFEngineConfig's fields,
vLLM's those plus VLLMOptions's. Importing this module does not import torch, transformers or vLLM:
that happens in `build_engine`. Knows nothing about rubrics, pipelines or files of trajectories.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import remote  # noqa: F401 - its @register_engine line registers the openai engine
from .options import ENGINE_OPTIONS, engines, readers, refuse_unread, register_engine, vllm_options
from .vllm_config import VLLMEngineConfig
from .vllm_options import VLLM_FIELDS

# what each in-process engine reads of ENGINE_OPTIONS (engine/options.py), and what to use instead:
# transformers all but vLLM's own options, vLLM its own and those both read
_QUANTISED = "give a quantised checkpoint as `model` (vLLM reads its quantization config)"
TRANSFORMERS_READS = ENGINE_OPTIONS - VLLM_FIELDS
TRANSFORMERS_INSTEAD = {
    "gpu_memory_utilization": "add `engine='vllm'`, or cap transformers' memory with `max_batch_tokens` (padded "
                              "tokens per generate call)",
    "max_num_seqs": "use `max_batch_size` (the most requests in one generate call), or add `engine='vllm'`",
    "max_model_len": "add `engine='vllm'`, or leave it out (transformers sets no context length; "
                     "`max_batch_tokens` caps a generate call's padded tokens)",
    "tensor_parallel_size": "use `device_map` (transformers' device_map), or add `engine='vllm'`"}
VLLM_READS = VLLM_FIELDS | {"adapter", "dtype", "votes", "max_visual_tokens", "max_pixels"}
VLLM_INSTEAD = {
    "device_map": "use `tensor_parallel_size` (GPUs one model is split over)",
    "attn_implementation": "vLLM picks its own attention backend",
    "compile": "vLLM compiles and captures CUDA graphs unless `enforce_eager=True`",
    "load_in_4bit": _QUANTISED, "load_in_8bit": _QUANTISED,
    "max_batch_size": "use `max_num_seqs` (the most requests vLLM runs at once)",
    "max_batch_tokens": "vLLM's per-step token budget is max_num_batched_tokens: use "
                        "`vllm_engine_args='{\"max_num_batched_tokens\": N}'`"}


def _hf_config(model: str, **options):
    from .hf_config import HFEngineConfig

    refuse_unread("transformers", vllm_options(options))
    return HFEngineConfig(model=model, **options)


@register_engine("transformers", reads=TRANSFORMERS_READS, instead=TRANSFORMERS_INSTEAD,
                 otherwise="add `engine='vllm'`, or leave it out", config=_hf_config, help="transformers' generate")
def _transformers(model: str, **options):
    from .hf import HFEngine

    return HFEngine(_hf_config(model, **options))


@register_engine("vllm", reads=VLLM_READS, instead=VLLM_INSTEAD,
                 otherwise="leave it out (the transformers engine's option)", config=VLLMEngineConfig,
                 help="one in-process vllm.LLM (continuous batching, paged KV cache, "
                                                   "prefix caching; pip install 'adaptrubric-local[vllm]')")
def _vllm(model: str, **options):
    from .vllm_engine import VLLMEngine

    return VLLMEngine(VLLMEngineConfig(model, **options))


def in_process() -> list[str]:
    """The engines `--engine` chooses from (registered, in process)."""
    return [name for name, spec in engines().items() if spec.in_process]


@dataclass
class EngineChoice:
    """Which in-process engine runs the model."""

    engine: str = field(default="transformers", metadata={"common": "model and engine",
        "help": "transformers: transformers' generate; vllm: one in-process vllm.LLM (paged KV cache, prefix "
                "caching; pip install 'adaptrubric-local[vllm]'); or one a --plugins file registers",
        "choices": in_process})

    def __post_init__(self):
        if self.engine not in in_process():
            raise ValueError(f"engine must be one of {', '.join(in_process())}, got {self.engine!r} (a Python "
                             "file given with --plugins FILE.py registers more)")


def _checked(model: str | None, engine: str):
    EngineChoice(engine)
    if not model:
        raise ValueError("no model given: pass --model (a hub id such as Qwen/Qwen3-VL-4B-Instruct, or a local "
                         "folder)")
    return engines()[engine]


def engine_config(model: str | None = None, engine: str = "transformers", **options):
    """The config `build_engine` would run the engine with (HFEngineConfig, or VLLMEngineConfig for
    vLLM), validated without importing torch or vLLM, so a verdict file's settings record can be
    checked before a model loads; None for a registered engine without a config."""
    spec = _checked(model, engine)
    return spec.config(model, **options) if spec.config is not None else None


def build_engine(model: str | None = None, engine: str = "transformers", **options):
    """The in-process engine `engine` for `model` with `options` (imports its backend): all of them for
    an engine with a config, else those the engine reads (its `reads`)."""
    spec = _checked(model, engine)
    if spec.config is None:
        options = {k: v for k, v in options.items() if engine in readers(k)}
    return spec.build(model, **options)
