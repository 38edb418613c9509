"""Which engine reads which option, and what to use instead: the one table both the Python API
(verifier.py's `resolve_engine`, for Verifier and RewardModel) and the command line
(cli/common.py's `check_engine_options`) refuse an unread option from.

Advice is written once, in option names: `name` (or `name=VALUE`, VALUE a Python literal) in
backticks; each surface renders it through `render` with its own spelling (flags on the command
line, keyword names in Python). An option not in `OPTIONS` is read by every engine. Knows nothing
about flags, keyword arguments or configs beyond those names.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from .vllm_config import VLLM_FIELDS

ENGINES = ("transformers", "vllm", "openai")
_QUANTISED = "give a quantised checkpoint as `model` (vLLM reads its quantization config)"


@dataclass(frozen=True)
class EngineOption:
    """One option: the engines that read it, and per engine that does not, what to use instead."""

    read_by: tuple[str, ...]
    instead: Mapping[str, str] = field(default_factory=dict)


# advice where an entry gives none, per engine that does not read the option
DEFAULT_INSTEAD = {"transformers": "add `engine='vllm'`, or leave it out",
                   "vllm": "leave it out (the transformers engine's option)",
                   "openai": "use the server's own setting (vLLM: a vllm serve flag)"}

OPTIONS: dict[str, EngineOption] = {
    **{name: EngineOption(("vllm",)) for name in sorted(VLLM_FIELDS)},
    "adapter": EngineOption(("transformers", "vllm"), {
        "openai": "serve the adapter on the server (vLLM: --lora-modules NAME=DIR) and pass NAME as `model`"}),
    "dtype": EngineOption(("transformers", "vllm")),
    "votes": EngineOption(("transformers", "vllm"), {
        "openai": "use `votes=1` (sampled votes are not supported on a server)"}),
    "max_visual_tokens": EngineOption(ENGINES),
    "max_pixels": EngineOption(ENGINES),
    "device_map": EngineOption(("transformers",), {
        "vllm": "use `tensor_parallel_size` (GPUs one model is split over)"}),
    "attn_implementation": EngineOption(("transformers",), {"vllm": "vLLM picks its own attention backend"}),
    "compile": EngineOption(("transformers",), {
        "vllm": "vLLM compiles and captures CUDA graphs unless `enforce_eager=True`"}),
    "load_in_4bit": EngineOption(("transformers",), {"vllm": _QUANTISED}),
    "load_in_8bit": EngineOption(("transformers",), {"vllm": _QUANTISED}),
    "max_batch_size": EngineOption(("transformers",), {
        "vllm": "use `max_num_seqs` (the most requests vLLM runs at once)"}),
    "max_batch_tokens": EngineOption(("transformers",), {
        "vllm": "vLLM's per-step token budget is max_num_batched_tokens: use "
                "`vllm_engine_args='{\"max_num_batched_tokens\": N}'`"}),
    "gpu_memory_utilization": EngineOption(("vllm",), {
        "transformers": "add `engine='vllm'`, or cap transformers' memory with `max_batch_tokens` (padded tokens "
                        "per generate call)"}),
    "max_num_seqs": EngineOption(("vllm",), {
        "transformers": "use `max_batch_size` (the most requests in one generate call), or add `engine='vllm'`"}),
    "max_model_len": EngineOption(("vllm",), {
        "transformers": "add `engine='vllm'`, or leave it out (transformers sets no context length; "
                        "`max_batch_tokens` caps a generate call's padded tokens)"}),
    "tensor_parallel_size": EngineOption(("vllm",), {
        "transformers": "use `device_map` (transformers' device_map), or add `engine='vllm'`"}),
}

_OPTION = re.compile(r"`([a-z_][a-z0-9_]*)(?:=([^`]*))?`")
NO_VALUE: Any = ...


def readers(name: str) -> tuple[str, ...]:
    """The engines that read option `name`."""
    entry = OPTIONS.get(name)
    return entry.read_by if entry else ENGINES


def advice(name: str, engine: str) -> Optional[str]:
    """What to use instead of option `name` with `engine`, in the table's markup; None: `engine` reads it."""
    entry = OPTIONS.get(name)
    if entry is None or engine in entry.read_by:
        return None
    return entry.instead.get(engine, DEFAULT_INSTEAD[engine])


def render(text: str, spell: Callable[[str, Any], str]) -> str:
    """`text` with each `name` / `name=VALUE` spelled by `spell(name, value)` (value NO_VALUE when none)."""
    return _OPTION.sub(lambda m: spell(m[1], NO_VALUE if m[2] is None else ast.literal_eval(m[2])), text)
