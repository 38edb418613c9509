"""Command-line flags from config dataclasses: one flag per field, named after it, its help from the
field's metadata, so a field's flag, config-file key and `--help` come from one place (as
transformers' `HfArgumentParser` does).

`add_config_arguments(parser, Config)` adds `--field-name` per field (booleans `--x/--no-x`; Optional
ints also take `none`; tuples comma-separated or `nargs`; lists repeatable; metadata may give
`choices`, or `no_flag` for a field a program sets) and records which flags were given
(`explicit(args)`); `config_kwargs(args, Config)` reads them back. A default reads in `--help` as
`(default VALUE)` or `(default: TEXT)` from the field's `none` metadata, decided here once.

`Parser`, every command's parser: no abbreviations; an unknown flag is answered by its subcommand with
the closest flag names and one usage line; `--help` shows the options most runs need (the
`HELP_GROUPS` a field's `common` metadata or `common(action, GROUP)` marks), `--help-all` every one.
Parsing only: imports nothing of the package and no model code.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import shutil
import textwrap
import typing
from collections.abc import Iterable
from typing import Any

EXPLICIT = "_explicit_options"

# The groups of a short `--help`, in this order (a group not named here comes after them)
HELP_GROUPS = ("data", "model and engine", "method", "output")
SHORT_HELP_OVER = 24  # a command with more options than this shows only its common ones in --help


class HelpAll(argparse.Action):
    """--help-all: every option of the command, in its full groups."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(parser.format_help(every=True), end="")
        parser.exit()


def common(action: argparse.Action, group: str) -> argparse.Action:
    """Show a hand-written flag in the short `--help`, under `group` (one of HELP_GROUPS, or a group of
    its own); returns the action."""
    action.common = group
    return action


class Parser(argparse.ArgumentParser):
    """argparse without abbreviations, an unknown flag answered by the (sub)command that was given it
    with the closest flag names, and a short `--help` beside `--help-all`."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        if self.add_help:
            self.add_argument("--help-all", action=HelpAll, help="show every option and exit")

    def commands(self):
        """The parsers under this one that run a command (no subcommands of their own), each once."""
        subs = [a.choices for a in self._actions if isinstance(getattr(a, "choices", None), dict)]
        if not subs:
            yield self
        for choices in subs:
            for sub in dict.fromkeys(choices.values()):  # an alias maps to its command's parser
                yield from sub.commands()

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = super().parse_known_args(args, namespace)
        if extras:  # what this parser (and the subcommands under it) did not take: report it here
            self.error(unknown_message(self.prog, [s for a in self._actions for s in a.option_strings], extras))
        return ns, extras

    def error(self, message: str):
        """A usage error (exit 2): the error and its did-you-mean first, then one line of usage and where
        the options are, not argparse's full usage block before the error (50 lines for `score`)."""
        self.exit(2, f"{self.prog}: error: {message}\n{self.one_line_usage()}\n")

    def one_line_usage(self) -> str:
        """`usage: adaptrubric score [options] DATA (see adaptrubric score --help)`."""
        shown = [a for a in self._actions if a.help != argparse.SUPPRESS]
        required = [f"{a.option_strings[0]} {a.metavar if isinstance(a.metavar, str) else a.dest.upper()}"
                    for a in shown if a.option_strings and a.required]
        args = [positional_usage(a) for a in shown if not a.option_strings]
        return " ".join(["usage:", self.prog, "[options]", *required, *args]) + f" (see {self.prog} --help)"

    def short(self) -> bool:
        """Whether `--help` shows only the common options: a command with many, some marked common."""
        options = [a for a in self._actions if a.option_strings and a.help != argparse.SUPPRESS]
        return len(options) > SHORT_HELP_OVER and any(getattr(a, "common", None) for a in options)

    def format_help(self, every: bool = False) -> str:
        if every or not self.short():
            return super().format_help()
        fmt = self._get_formatter()
        visible = [a for a in self._actions if a.help != argparse.SUPPRESS]
        positionals = [a for a in visible if not a.option_strings]
        args = " ".join(positional_usage(a) for a in positionals)
        fmt.add_usage(f"{self.prog} [options] {args}".rstrip(), None, [])
        if self.description:  # wrapped here: a raw-description command keeps its own lines in --help-all
            width = max(40, shutil.get_terminal_size().columns - 4)  # argparse's own width, less 2
            fmt.add_text("\n\n".join(textwrap.fill(" ".join(part.split()), width) for part in
                                     self.description.split("\n\n")))
        groups: dict[str, list] = {name: [] for name in HELP_GROUPS}
        for a in positionals:
            groups.setdefault("data" if a.dest == "data" else "arguments", []).append(a)
        shown = [a for a in visible if a.option_strings and (getattr(a, "common", None) or a.required)]
        for a in shown:  # a required option nobody marked is shown all the same
            groups.setdefault(getattr(a, "common", None) or ("output" if a.dest == "out" else "options"), []).append(a)
        for name, actions in sorted(groups.items(), key=lambda kv: kv[0] != "arguments"):
            if actions:
                fmt.start_section(name)
                fmt.add_arguments(actions)
                fmt.end_section()
        hidden = sum(bool(a.option_strings) for a in visible) - len(shown) - 2  # -h and --help-all
        fmt.add_text(f"{hidden} more options: {self.prog} --help-all")
        fmt.add_text(self.epilog)
        return fmt.format_help()


def positional_usage(a: argparse.Action) -> str:
    """A positional argument as the usage line writes it (`DATA`, `[DATA]`, `FILE [FILE ...]`)."""
    name = a.metavar if isinstance(a.metavar, str) else a.dest
    return {"?": f"[{name}]", "*": f"[{name} ...]", "+": f"{name} [{name} ...]"}.get(a.nargs, name)


def unknown_message(prog: str, flags: Iterable[str], extras: list[str]) -> str:
    """'unrecognized arguments: ...' with, per unknown flag among `extras`, the closest of the flags of
    command `prog`."""
    known = [s for s in flags if s.startswith("--")]
    hints = []
    for arg in extras:
        if not arg.startswith("--"):
            continue
        name = arg.split("=", 1)[0]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hints.append(f"{name}: did you mean {' or '.join(close)}?" if close else
                     f"{name} is not a flag of {prog}")
    return f"unrecognized arguments: {' '.join(extras)}" + ("\n" + "\n".join(hints) if hints else "")


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


def _given(namespace, dest: str) -> None:
    """Remember on `namespace` that the flag of `dest` was given."""
    setattr(namespace, EXPLICIT, {*getattr(namespace, EXPLICIT, set()), dest})


class Record(argparse.Action):
    """Store the value and remember that the flag was given."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        _given(namespace, self.dest)


class RecordAppend(argparse.Action):
    """Append the value (a repeatable flag) and remember that the flag was given."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest, None) or [])
        if self.dest not in getattr(namespace, EXPLICIT, set()):
            items = []  # the first use replaces the default
        setattr(namespace, self.dest, [*items, values])
        _given(namespace, self.dest)


class RecordBool(argparse.BooleanOptionalAction):
    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        _given(namespace, self.dest)


def flag_name(field_name: str) -> str:
    """The flag of a config field: `max_images` -> `--max-images`."""
    return "--" + field_name.replace("_", "-")


def config_fields(cls, skip: Iterable[str] = (), only: Iterable[str] | None = None) -> list[dataclasses.Field]:
    """The fields of `cls` that become flags (all but `skip` and those marked no_flag; or just `only`)."""
    skip, only = set(skip), (set(only) if only is not None else None)
    return [f for f in dataclasses.fields(cls) if f.name not in skip and not f.metadata.get("no_flag")
            and (only is None or f.name in only)]


def shown_default(f: dataclasses.Field, default: Any, kind, optional: bool, shown: str | None = None) -> str:
    """How a field's default reads at the end of its help, the one place that decides it:
    `(default 8)`, `(default on)`, `(default: TEXT)` (`shown`, or the field's `none` metadata when the
    default is None: what None means), `(default 1024; none: no limit)` for an optional value whose
    None means something else."""
    means = f.metadata.get("none")
    if shown is not None:
        return f"(default: {shown})"
    if kind is bool:
        return f"(default {'on' if default else 'off'})"
    if default is None or default == ():
        return f"(default: {means})" if means else "(default none)"
    value = ",".join(default) if isinstance(default, tuple) else default
    return f"(default {value}; none: {means})" if optional and means else f"(default {value})"


def add_config_arguments(parser, cls, skip: Iterable[str] = (), defaults: dict | None = None,
                         choices: dict | None = None, hide_defaults: bool = False,
                         only: Iterable[str] | None = None, shown: dict | None = None) -> None:
    """One flag per field of dataclass `cls` on `parser` (a parser or an argument group); a field whose
    metadata names a `common` group is shown in the short `--help` under it. `defaults`
    overrides shown/used defaults; `shown` describes a default the command derives (`{"field": "4 x
    --max-batch-size"}`); with `hide_defaults` every flag defaults to None (a config file or the
    dataclass supplies the value) while its help still shows the field's default."""
    hints = typing.get_type_hints(cls)
    defaults, choices, shown = defaults or {}, choices or {}, shown or {}
    for f in config_fields(cls, skip, only):
        default = defaults.get(f.name, _default(f))
        kind, optional = _unwrap(hints[f.name])
        text = f.metadata.get("help", "").replace("%", "%%")
        used = None if hide_defaults else default
        allowed = choices.get(f.name, f.metadata.get("choices"))
        if callable(allowed):  # a registry's names, read when the flags are made (after --plugins)
            allowed = list(allowed())
        tail = shown_default(f, default, kind, optional, shown.get(f.name)).replace("%", "%%")
        if kind is bool:
            kw = {"action": RecordBool}
        elif typing.get_origin(kind) is list:
            tail = "(repeatable)" if not default and not f.metadata.get("none") else f"(repeatable) {tail}"
            kw = {"action": RecordAppend, "metavar": f.metadata.get("metavar", "VALUE")}
        else:
            nargs = f.metadata.get("nargs")  # a fixed-length tuple given as separate values: --band LO HI
            convert = typing.get_args(kind)[0] if nargs else (
                _csv if typing.get_origin(kind) is tuple else (none_or(kind) if optional else kind))
            kw = {"action": Record, "type": convert, "choices": allowed, "nargs": nargs,
                  "metavar": None if allowed else f.metadata.get("metavar", f.name.upper())}
        action = parser.add_argument(flag_name(f.name), dest=f.name, default=used, help=f"{text} {tail}", **kw)
        if f.metadata.get("common"):
            common(action, f.metadata["common"])


def explicit(args: argparse.Namespace) -> set[str]:
    """Names of the config fields whose flags were given on the command line."""
    return set(getattr(args, EXPLICIT, set()))


def config_kwargs(args: argparse.Namespace, cls, skip: Iterable[str] = (), only_given: bool = False) -> dict:
    """Keyword arguments for `cls` from parsed flags (`only_given`: just the flags that were given)."""
    given = explicit(args) if only_given else None
    return {f.name: getattr(args, f.name) for f in config_fields(cls, skip)
            if hasattr(args, f.name) and (given is None or f.name in given)}
