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


# ----------------------------------------------------------------------------- every command
def _commands():
    """(command, parser) for every subcommand of `adaptrubric`, nested ones included."""
    from adaptrubric_local.cli import build_parser

    out = []

    def walk(p, name):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            out.append((name.strip(), p))
        for a in subs:
            for n, sp in a.choices.items():
                walk(sp, f"{name} {n}")

    walk(build_parser(), "")
    return dict(out)


def _exposed():
    """Which configs each command takes flags for (None: all fields; else the fields it exposes)."""
    from adaptrubric_local.bank_induction.induce import InduceConfig
    from adaptrubric_local.bank_induction.refine import RefineConfig
    from adaptrubric_local.cli_serve import CLIENT_ONLY
    from adaptrubric_local.distill.collect import CollectConfig
    from adaptrubric_local.distill.config import TrainConfig
    from adaptrubric_local.engine.build import EngineChoice
    from adaptrubric_local.engine.hf_config import HFEngineConfig
    from adaptrubric_local.engine.remote import RemoteConfig
    from adaptrubric_local.engine.teacher import TeacherConfig
    from adaptrubric_local.engine.vllm_engine import VLLMConfig
    from adaptrubric_local.flags import config_fields
    from adaptrubric_local.pipeline import PipelineConfig
    from adaptrubric_local.reward_config import RewardConfig
    from adaptrubric_local.serve import ServeConfig

    engines = [(EngineChoice, None), (HFEngineConfig, None), (VLLMConfig, None), (RemoteConfig, None)]
    scoring = [(PipelineConfig, None), *engines]
    shared_teacher = {"teacher_max_new_tokens"}  # induce/refine read the teacher's cap from the teacher's flag
    return {
        "route": [(PipelineConfig, {"router", "bank_path"}), *engines],
        "prompt": scoring, "score": scoring, "eval": scoring, "ablate": scoring, "tts": scoring,
        "serve": [(ServeConfig, None), (RewardConfig, {f.name for f in config_fields(RewardConfig, CLIENT_ONLY)}),
                  *scoring],
        "distill collect": [(TeacherConfig, None), (CollectConfig, None), (PipelineConfig, {"router", "max_images"})],
        "distill train": [(TrainConfig, None)], "distill plan": [(TrainConfig, None)],
        "bank induce": [(TeacherConfig, None), (InduceConfig, {f.name for f in config_fields(InduceConfig)}
                                                - shared_teacher)],
        "bank refine": [(TeacherConfig, None), (RefineConfig, {f.name for f in config_fields(RefineConfig)}
                                                - shared_teacher), *scoring],
    }


def test_every_config_field_has_exactly_one_flag_named_after_it_on_every_command():
    from adaptrubric_local.flags import config_fields, flag_name

    commands = _commands()
    exposed = _exposed()
    assert set(exposed) <= set(commands)
    for command, configs in exposed.items():
        actions = commands[command]._actions
        for cls, only in configs:
            for f in config_fields(cls, only=only):
                mine = [a for a in actions if a.dest == f.name]
                assert len(mine) == 1, f"{command}: {cls.__name__}.{f.name} has {len(mine)} flags"
                flag = flag_name(f.name)
                allowed = {flag, flag.replace("--", "--no-", 1)}
                assert flag in mine[0].option_strings and set(mine[0].option_strings) <= allowed, (
                    f"{command}: {cls.__name__}.{f.name} is spelled {mine[0].option_strings}")


def test_batch_size_means_one_thing():
    """No command has a bare --batch-size: each batch is named after what it counts."""
    for command, parser in _commands().items():
        flags = {s for a in parser._actions for s in a.option_strings}
        assert "--batch-size" not in flags and "--max-batch" not in flags, command


def test_reward_config_keys_are_the_serve_flags():
    """A reward.yaml key is the flag of the same name on `serve` (one vocabulary for files and flags)."""
    from adaptrubric_local.cli_serve import CLIENT_ONLY
    from adaptrubric_local.engine.build import EngineChoice
    from adaptrubric_local.engine.hf_config import HFEngineConfig
    from adaptrubric_local.engine.vllm_engine import VLLMConfig
    from adaptrubric_local.flags import config_fields, flag_name
    from adaptrubric_local.pipeline import PipelineConfig
    from adaptrubric_local.reward_config import RewardConfig

    flags = {s for a in _commands()["serve"]._actions for s in a.option_strings}
    keys = [f.name for cls in (RewardConfig, PipelineConfig, EngineChoice, HFEngineConfig, VLLMConfig)
            for f in config_fields(cls, CLIENT_ONLY)]
    assert [k for k in keys if flag_name(k) not in flags] == []
