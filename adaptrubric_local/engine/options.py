"""Which engine reads which option, and what to use instead: the one table both the Python API
(verifier.py's `resolve_engine`, for Verifier and RewardModel) and the command line
(cli/common.py's `check_engine_options`) refuse an unread option from, and `ENGINES`, the registry
`engine="NAME"` and `--engine NAME` choose from.

An engine is registered by one decorator on the function that builds it, naming the options of this
table it reads (`reads`): the package's own engines (engine/build.py, engine/remote.py) as a user's
file (`--plugins FILE.py`) does:

    @register_engine("echo", reads=("max_visual_tokens",), help="...")
    def build_echo(model, **options): ...

Advice is written once, in option names: `name` (or `name=VALUE`, VALUE a Python literal) in
backticks; each surface renders it through `render` with its own spelling (flags on the command
line, keyword names in Python), and `unread` words the refusal the same way for both. An option
not in `OPTIONS` is read by every engine. Knows nothing about flags, keyword arguments or configs
beyond those names.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..registry import Registry
from .vllm_options import VLLM_FIELDS

BUILT_IN = ("transformers", "vllm", "openai")
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
    "max_visual_tokens": EngineOption(BUILT_IN),
    "max_pixels": EngineOption(BUILT_IN),
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



@dataclass(frozen=True)
class EngineSpec:
    """A registered engine: `build(model, **options)` makes it (importing its backend); `config(model,
    **options)`, when given, is the validated settings record it would run with (no backend
    imported), and then every engine option goes to it; without one, `build` gets only the options
    the table says it reads. `in_process`: chosen with `--engine` (False: `openai`, chosen by a
    server's address)."""

    name: str
    build: Callable[..., Any]
    reads: frozenset[str] = frozenset()
    config: Callable[..., Any] | None = None
    help: str = ""
    in_process: bool = True


ENGINES: Registry[EngineSpec] = Registry("engine")


def register_engine(name: str, *, reads: Iterable[str] = (), config: Callable[..., Any] | None = None,
                    help: str = "", in_process: bool = True, replace: bool = False):
    """Decorator: register the function below, `build(model, **options) -> Engine`, as engine `name`,
    reading the options of OPTIONS named in `reads` (besides those every engine reads); see EngineSpec."""
    reads = frozenset(reads)
    unknown = sorted(reads - set(OPTIONS))
    if unknown:
        raise ValueError(f"engine {name!r}: reads names options of engine/options.py's table; {', '.join(unknown)} "
                         f"{'is' if len(unknown) == 1 else 'are'} not among them (an option not in the table is read "
                         "by every engine)")

    def wrap(build: Callable[..., Any]) -> Callable[..., Any]:
        ENGINES.add(name, EngineSpec(name, build, reads, config, help, in_process), replace)
        return build
    return wrap


_OPTION = re.compile(r"`([a-z_][a-z0-9_]*)(?:=([^`]*))?`")
NO_VALUE: Any = ...


def readers(name: str) -> tuple[str, ...]:
    """The engines that read option `name`."""
    entry = OPTIONS.get(name)
    if entry is None:
        return BUILT_IN + tuple(e for e in ENGINES if e not in BUILT_IN)
    return entry.read_by + tuple(e for e, spec in ENGINES.items() if name in spec.reads and e not in entry.read_by)


def advice(name: str, engine: str) -> str | None:
    """What to use instead of option `name` with `engine`, in the table's markup; None: `engine` reads it."""
    entry = OPTIONS.get(name)
    if entry is None or engine in readers(name):
        return None
    return entry.instead.get(engine, DEFAULT_INSTEAD.get(engine, "leave it out"))


def render(text: str, spell: Callable[[str, Any], str]) -> str:
    """`text` with each `name` / `name=VALUE` spelled by `spell(name, value)` (value NO_VALUE when none)."""
    return _OPTION.sub(lambda m: spell(m[1], NO_VALUE if m[2] is None else ast.literal_eval(m[2])), text)


def plain(name: str, value: Any = NO_VALUE) -> str:
    """An option as a keyword argument of the engine builders writes it (`name`, `name=VALUE`)."""
    return name if value is NO_VALUE else f"{name}={value!r}"


def unread(engine: str, names: Iterable[str], spell: Callable[[str, Any], str] = plain) -> str | None:
    """Why `engine` refuses the options `names` it does not read, one clause per option naming the
    engines that read it and what to use instead, spelled by `spell` (the engine as option `engine`);
    None when it reads them all."""
    msgs = []
    for name in sorted(set(names)):
        instead = advice(name, engine)
        if instead is not None:
            by = " and ".join(spell("engine", e) for e in readers(name)) or "no registered engine"
            msgs.append(f"{spell(name, NO_VALUE)} is an option of {by}, not read by {spell('engine', engine)}: "
                        f"{render(instead, spell)}")
    return "; ".join(msgs) or None


def refuse_unread(engine: str, names: Iterable[str], spell: Callable[[str, Any], str] = plain) -> None:
    """ValueError with `unread`'s message when `engine` does not read one of `names`."""
    msg = unread(engine, names, spell)
    if msg:
        raise ValueError(msg)


def vllm_options(names: Iterable[str]) -> list[str]:
    """Those of `names` that are vLLM's own options (VLLMOptions's fields)."""
    return sorted(n for n in names if n in VLLM_FIELDS)
