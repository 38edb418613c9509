"""Command-line flags from config dataclasses: one flag per field, named after the field, its help
from the field's metadata, so a field's flag, its config-file key and its `--help` come from one
place (as transformers' `HfArgumentParser` does for its argument dataclasses).

`add_config_arguments(parser, Config)` adds `--field-name` for every field (booleans get
`--x/--no-x`; `Optional[int]` fields also take `none`; tuple fields take comma-separated values;
list fields are repeatable; a field's metadata may name its `choices`, or `no_flag` for a field a
program sets rather than a person) and records which flags were actually given, so a caller can
tell "not given" from "given the default" (`explicit(args)`). `config_kwargs(args, Config)` reads
them back. Parsing only: imports nothing of the package and no model code.
"""
from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any, Iterable, Optional

EXPLICIT = "_explicit_options"


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _unwrap(hint) -> tuple[Any, bool]:
    """(the scalar type of a hint, whether None is allowed)."""
    args = typing.get_args(hint)
    if type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if rest else str), True
    return hint, False


def none_or(kind):
    """A converter that reads `none`/`null` as None and anything else with `kind`."""
    def convert(text: str):
        return None if text.strip().lower() in ("none", "null") else kind(text)

    convert.__name__ = getattr(kind, "__name__", "value")
    return convert


def _csv(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


class Record(argparse.Action):
    """Store the value and remember that the flag was given."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        given = set(getattr(namespace, EXPLICIT, set()))
        given.add(self.dest)
        setattr(namespace, EXPLICIT, given)


class RecordAppend(argparse.Action):
    """Append the value (a repeatable flag) and remember that the flag was given."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest, None) or [])
        if self.dest not in getattr(namespace, EXPLICIT, set()):
            items = []  # the first use replaces the default
        setattr(namespace, self.dest, items + [values])
        given = set(getattr(namespace, EXPLICIT, set()))
        given.add(self.dest)
        setattr(namespace, EXPLICIT, given)


class RecordBool(argparse.BooleanOptionalAction):
    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        given = set(getattr(namespace, EXPLICIT, set()))
        given.add(self.dest)
        setattr(namespace, EXPLICIT, given)


def flag_name(field_name: str) -> str:
    """The flag of a config field: `max_new_tokens` -> `--max-new-tokens`."""
    return "--" + field_name.replace("_", "-")


def config_fields(cls, skip: Iterable[str] = (), only: Optional[Iterable[str]] = None) -> list[dataclasses.Field]:
    """The fields of `cls` that become flags (all but `skip` and those marked no_flag; or just `only`)."""
    skip, only = set(skip), (set(only) if only is not None else None)
    return [f for f in dataclasses.fields(cls) if f.name not in skip and not f.metadata.get("no_flag")
            and (only is None or f.name in only)]


def add_config_arguments(parser, cls, skip: Iterable[str] = (), defaults: Optional[dict] = None,
                         choices: Optional[dict] = None, hide_defaults: bool = False,
                         only: Optional[Iterable[str]] = None) -> None:
    """One flag per field of dataclass `cls` on `parser` (a parser or an argument group). `defaults`
    overrides shown/used defaults; with `hide_defaults` every flag defaults to None (a config file
    or the dataclass supplies the value) while its help still shows the field's default."""
    hints = typing.get_type_hints(cls)
    defaults, choices = defaults or {}, choices or {}
    for f in config_fields(cls, skip, only):
        default = defaults.get(f.name, _default(f))
        kind, optional = _unwrap(hints[f.name])
        text = f.metadata.get("help", "").replace("%", "%%")
        used = None if hide_defaults else default
        allowed = choices.get(f.name, f.metadata.get("choices"))
        if kind is bool:
            parser.add_argument(flag_name(f.name), dest=f.name, action=RecordBool, default=used,
                                help=f"{text} (default {'on' if default else 'off'})")
            continue
        if typing.get_origin(kind) is list:
            parser.add_argument(flag_name(f.name), dest=f.name, action=RecordAppend, default=used,
                                metavar=f.metadata.get("metavar", "VALUE"), help=f"{text} (repeatable)")
            continue
        if typing.get_origin(kind) is tuple:
            convert, shown = _csv, ",".join(default or ())
        else:
            convert, shown = (none_or(kind) if optional else kind), ("none" if default is None else default)
        parser.add_argument(flag_name(f.name), dest=f.name, type=convert, default=used, action=Record,
                            choices=allowed, metavar=None if allowed else f.metadata.get("metavar", f.name.upper()),
                            help=f"{text} (default {shown}{'; none: no limit' if optional and kind is int else ''})")


def explicit(args: argparse.Namespace) -> set[str]:
    """Names of the config fields whose flags were given on the command line."""
    return set(getattr(args, EXPLICIT, set()))


def config_kwargs(args: argparse.Namespace, cls, skip: Iterable[str] = (), only_given: bool = False) -> dict:
    """Keyword arguments for `cls` from parsed flags (`only_given`: just the flags that were given)."""
    names = [f.name for f in config_fields(cls, skip) if hasattr(args, f.name)]
    if only_given:
        given = explicit(args)
        return {n: getattr(args, n) for n in names if n in given}
    return {n: getattr(args, n) for n in names if hasattr(args, n)}
