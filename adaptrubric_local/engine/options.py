"""What an engine reads, and what to use instead: `ENGINES`, the registry `engine="NAME"` and
`--engine NAME` choose from, each entry (`EngineSpec`) naming the options of `ENGINE_OPTIONS` the
engine reads and, per option it does not, what to use instead; the Python API and the command line
both refuse an unread option from the specs. An engine is registered by one decorator on the function
that builds it (`register_engine`), the package's own (engine/build.py, engine/remote.py) as a
`--plugins` file's. Advice is written once, in option names (`name` or `name=VALUE` in backticks),
and each surface renders it with its own spelling (`render`, `unread`). An option not in
`ENGINE_OPTIONS` is read by every engine. Knows nothing about flags, keyword arguments or configs
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

# the options some engines read and others do not (vLLM's own options among them); any other option is
# read by every engine
ENGINE_OPTIONS = frozenset({
    *VLLM_FIELDS, "adapter", "dtype", "votes", "max_visual_tokens", "max_pixels", "device_map",
    "attn_implementation", "compile", "load_in_4bit", "load_in_8bit", "max_batch_size", "max_batch_tokens"})


@dataclass(frozen=True)
class EngineSpec:
    """A registered engine: `build(model, **options)` makes it (importing its backend); `reads`, the
    options of ENGINE_OPTIONS it reads; `instead`, per option it does not read, what to use instead
    (`otherwise` for the rest); `config(model, **options)`, when given, is the validated settings record
    it would run with, and gets every engine option (without one, `build` gets only those it reads).
    `in_process`: chosen with `--engine` (False: `openai`, chosen by a server's address)."""

    name: str
    build: Callable[..., Any]
    reads: frozenset[str] = frozenset()
    instead: Mapping[str, str] = field(default_factory=dict)
    otherwise: str = "leave it out"
    config: Callable[..., Any] | None = None
    help: str = ""
    in_process: bool = True


ENGINES: Registry[EngineSpec] = Registry("engine", EngineSpec)


def register_engine(name: str, *, reads: Iterable[str] = (), instead: Mapping[str, str] | None = None,
                    otherwise: str = "leave it out", config: Callable[..., Any] | None = None, help: str = "",
                    in_process: bool = True, replace: bool = False):
    """Decorator: register the function below, `build(model, **options) -> Engine`, as engine `name`,
    reading the options of ENGINE_OPTIONS named in `reads` (besides those every engine reads); see
    EngineSpec."""
    reads, instead = frozenset(reads), dict(instead or {})
    if unknown := sorted((reads | set(instead)) - ENGINE_OPTIONS):
        raise ValueError(f"engine {name!r}: reads names options of engine/options.py's ENGINE_OPTIONS; "
                         f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not among them (an option "
                         "not among them is read by every engine)")
    return ENGINES.register(name, replace=replace, reads=reads, instead=instead, otherwise=otherwise, config=config,
                            help=help, in_process=in_process)


def engines() -> Registry[EngineSpec]:
    """ENGINES, the package's own engines among them (engine/__init__ imports engine/build.py, whose
    @register_engine lines register them, before any engine module runs)."""
    return ENGINES


_OPTION = re.compile(r"`([a-z_][a-z0-9_]*)(?:=([^`]*))?`")
NO_VALUE: Any = ...


def readers(name: str) -> tuple[str, ...]:
    """The engines that read option `name` (those in process first)."""
    specs = sorted(engines().values(), key=lambda spec: not spec.in_process)
    return tuple(spec.name for spec in specs if name not in ENGINE_OPTIONS or name in spec.reads)


def advice(name: str, engine: str) -> str | None:
    """What to use instead of option `name` with `engine`, in the specs' markup; None: `engine` reads it."""
    if name not in ENGINE_OPTIONS or engine in readers(name):
        return None
    spec = engines().get(engine)
    return "leave it out" if spec is None else spec.instead.get(name, spec.otherwise)


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
    if msg := unread(engine, names, spell):
        raise ValueError(msg)


def vllm_options(names: Iterable[str]) -> list[str]:
    """Those of `names` that are vLLM's own options (VLLMOptions's fields)."""
    return sorted(n for n in names if n in VLLM_FIELDS)
