"""Building an engine from options: the one place outside the engine package that knows how.

`add_engine_arguments` turns every field of `HFEngineConfig` into a command-line flag (name from the
field, help from its metadata), so a new engine option is on every command at once; `engine_kwargs`
reads them back from parsed arguments and `build_engine` makes the transformers engine. Importing
this module does not import torch or transformers: that happens in `build_engine`. Knows nothing
about rubrics, pipelines or files of trajectories.
"""
from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any, Optional

from ..flags import Record, RecordBool, none_or

# fields set by the caller rather than by a flag of their own
NOT_FLAGS = {"model", "max_new_tokens"}
# flags kept under an older, shorter name
ALIASES = {"max_batch_size": ["--batch-size"]}
# fields whose flag has another name (the plain one means something else on some commands)
RENAMED = {"seed": "--sampling-seed"}
CHOICES = {"dtype": ["auto", "bf16", "fp16", "fp32"]}


def _config_class():
    # the dataclass lives beside the torch code; read its fields without importing torch
    from importlib import import_module

    return import_module("adaptrubric_local.engine.hf_config").HFEngineConfig


def engine_fields() -> list[dataclasses.Field]:
    """The HFEngineConfig fields that become flags."""
    return [f for f in dataclasses.fields(_config_class()) if f.name not in NOT_FLAGS]


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _scalar_type(hint) -> type:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


def add_engine_arguments(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """Add --model and one flag per engine option to `parser` (in an "engine" group)."""
    group = parser.add_argument_group("engine (transformers, Qwen3-VL)")
    group.add_argument("--model", required=required,
                       help="Qwen3-VL checkpoint: a hub id (e.g. Qwen/Qwen3-VL-4B-Instruct) or a local folder "
                            "saved with save_pretrained (safetensors)")
    hints = typing.get_type_hints(_config_class())
    for f in engine_fields():
        flag = RENAMED.get(f.name, "--" + f.name.replace("_", "-"))
        names = ALIASES.get(f.name, []) + [flag]
        default = _default(f)
        help_text = f.metadata.get("help", "").replace("%", "%%")
        kind = _scalar_type(hints[f.name])
        if kind is bool:
            group.add_argument(*names, dest=f.name, action=RecordBool, default=default,
                               help=f"{help_text} (default {'on' if default else 'off'})")
            continue
        shown = "none" if default is None else default
        optional = type(None) in typing.get_args(hints[f.name])
        group.add_argument(*names, dest=f.name, type=none_or(kind) if optional else kind, default=default,
                           choices=CHOICES.get(f.name), action=Record,
                           metavar=None if f.name in CHOICES else f.name.upper(),
                           help=f"{help_text} (default {shown})")


def engine_kwargs(args: argparse.Namespace, **overrides) -> dict[str, Any]:
    """HFEngineConfig keyword arguments from parsed flags (missing flags take the field default)."""
    kw = {f.name: getattr(args, f.name, _default(f)) for f in engine_fields()}
    kw["model"] = getattr(args, "model", None)
    kw.update(overrides)
    return kw


def build_engine(model: Optional[str] = None, **options):
    """The transformers engine for `model` with HFEngineConfig `options` (imports torch)."""
    from .hf import HFEngine, HFEngineConfig

    if not model:
        raise ValueError("no model given: pass --model (a hub id such as Qwen/Qwen3-VL-4B-Instruct, or a local "
                         "folder)")
    return HFEngine(HFEngineConfig(model=model, **options))
