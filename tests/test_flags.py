"""Flags from config dataclasses (flags.py): one flag per field, named after it, with its help and
default; `none` for optional numbers, comma lists for tuples, --x/--no-x for booleans; and which flags
were given, so a value given on the command line can be told from a default."""
import argparse
from dataclasses import dataclass, field
from typing import Optional

import pytest

from adaptrubric_local.flags import add_config_arguments, config_kwargs, explicit


@dataclass
class Demo:
    data: str = field(default="d", metadata={"help": "positional", "no_flag": True})
    max_new_tokens: int = field(default=8, metadata={"help": "a cap"})
    budget: Optional[int] = field(default=None, metadata={"help": "a budget"})
    tasks: tuple[str, ...] = field(default=("a",), metadata={"help": "some tasks"})
    fast: bool = field(default=False, metadata={"help": "go fast"})
    rate: float = field(default=0.5, metadata={"help": "50% of it"})


def _parser(**kw):
    ap = argparse.ArgumentParser()
    add_config_arguments(ap, Demo, **kw)
    return ap


def test_one_flag_per_field_named_after_it():
    ap = _parser()
    flags = {o for a in ap._actions for o in a.option_strings} - {"-h", "--help"}
    assert flags == {"--max-new-tokens", "--budget", "--tasks", "--fast", "--no-fast", "--rate"}
    text = ap.format_help()
    assert "a cap (default 8)" in text and "50% of it" in text and "(default none; none: no limit)" in text


def test_values_and_what_was_given():
    args = _parser().parse_args(["--budget", "none", "--tasks", "a,b", "--fast", "--max-new-tokens", "3"])
    assert config_kwargs(args, Demo) == {"max_new_tokens": 3, "budget": None, "tasks": ("a", "b"), "fast": True,
                                         "rate": 0.5}
    assert explicit(args) == {"budget", "tasks", "fast", "max_new_tokens"}
    assert config_kwargs(args, Demo, only_given=True) == {"max_new_tokens": 3, "budget": None, "tasks": ("a", "b"),
                                                          "fast": True}
    assert _parser().parse_args(["--budget", "12"]).budget == 12
    with pytest.raises(SystemExit):
        _parser().parse_args(["--budget", "many"])


def test_hidden_defaults_leave_the_value_to_a_config_file():
    args = _parser(hide_defaults=True).parse_args([])
    assert args.max_new_tokens is None and explicit(args) == set()
    assert "(default 8)" in _parser(hide_defaults=True).format_help()
