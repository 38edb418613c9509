"""Flags from config dataclasses (flags.py): one flag per field, named after it, with its help and
default; `none` for optional numbers, comma lists for tuples, --x/--no-x for booleans; and which flags
were given, so a value given on the command line can be told from a default."""
import argparse
from dataclasses import dataclass, field

import pytest

from adaptrubric_local.flags import add_config_arguments, config_kwargs, explicit


@dataclass
class Demo:
    data: str = field(default="d", metadata={"help": "positional", "no_flag": True})
    max_new_tokens: int = field(default=8, metadata={"help": "a cap"})
    budget: int | None = field(default=None, metadata={"help": "a budget", "none": "no limit"})
    queue: int | None = field(default=4, metadata={"help": "a queue", "none": "unbounded"})
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
    assert flags == {"--max-new-tokens", "--budget", "--queue", "--tasks", "--fast", "--no-fast", "--rate"}
    text = " ".join(ap.format_help().split())
    assert "a cap (default 8)" in text and "50% of it (default 0.5)" in text and "a budget (default: no limit)" in text
    assert "a queue (default 4; none: unbounded)" in text and "go fast (default off)" in text


def test_values_and_what_was_given():
    args = _parser().parse_args(["--budget", "none", "--tasks", "a,b", "--fast", "--max-new-tokens", "3"])
    assert config_kwargs(args, Demo) == {"max_new_tokens": 3, "budget": None, "queue": 4, "tasks": ("a", "b"),
                                         "fast": True, "rate": 0.5}
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
    from adaptrubric_local.cli.common import ROUTING_ENGINE_OPTIONS, ROUTING_REMOTE_OPTIONS
    from adaptrubric_local.cli.serve import CLIENT_ONLY
    from adaptrubric_local.distill.collect import CollectConfig
    from adaptrubric_local.distill.config import TrainConfig
    from adaptrubric_local.engine.build import EngineChoice
    from adaptrubric_local.engine.hf_config import HFEngineConfig
    from adaptrubric_local.engine.remote import RemoteConfig
    from adaptrubric_local.engine.teacher import TeacherConfig
    from adaptrubric_local.engine.vllm_engine import VLLMOptions
    from adaptrubric_local.evaluation.review_order import ReviewOrderConfig
    from adaptrubric_local.flags import config_fields
    from adaptrubric_local.labels import LabelsConfig
    from adaptrubric_local.pipeline import PipelineConfig
    from adaptrubric_local.rewards.config import RewardConfig
    from adaptrubric_local.rewards.serve import ServeConfig

    engines = [(EngineChoice, None), (HFEngineConfig, None), (VLLMOptions, None), (RemoteConfig, None)]
    scoring = [(PipelineConfig, None), *engines]
    labels = [(LabelsConfig, None)]
    shared_teacher = {"teacher_max_new_tokens"}  # induce/refine read the teacher's cap from the teacher's flag
    return {
        "route": [(PipelineConfig, {"router", "bank_path"}), (EngineChoice, None),
                  (HFEngineConfig, set(ROUTING_ENGINE_OPTIONS)), (RemoteConfig, set(ROUTING_REMOTE_OPTIONS))],
        "prompt": scoring, "score": scoring, "eval": scoring + labels, "ablate": scoring, "tts": scoring + labels,
        "review": [(ReviewOrderConfig, None), *labels], "calibrate": labels, "labels merge": labels,
        "serve": [(ServeConfig, None), (RewardConfig, {f.name for f in config_fields(RewardConfig, CLIENT_ONLY)}),
                  *scoring],
        "distill collect": [(TeacherConfig, None), (CollectConfig, None), (PipelineConfig, {"router", "max_images"}),
                            *labels],
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
    from adaptrubric_local.cli.serve import CLIENT_ONLY
    from adaptrubric_local.engine.build import EngineChoice
    from adaptrubric_local.engine.hf_config import HFEngineConfig
    from adaptrubric_local.engine.vllm_engine import VLLMOptions
    from adaptrubric_local.flags import config_fields, flag_name
    from adaptrubric_local.pipeline import PipelineConfig
    from adaptrubric_local.rewards.config import RewardConfig

    flags = {s for a in _commands()["serve"]._actions for s in a.option_strings}
    keys = [f.name for cls in (RewardConfig, PipelineConfig, EngineChoice, HFEngineConfig, VLLMOptions)
            for f in config_fields(cls, CLIENT_ONLY)]
    assert [k for k in keys if flag_name(k) not in flags] == []


# ----------------------------------------------------------------------------- what a user types
def _all_parsers():
    """Every parser a user can reach: `adaptrubric` and its subcommands, `python -m
    adaptrubric_local.cli.serve` and `python -m adaptrubric_local.distill.train`."""
    import adaptrubric_local.cli.serve as cli_serve
    from adaptrubric_local.distill import train

    made = []
    real = argparse.ArgumentParser.parse_args

    def grab(self, args=None, namespace=None):  # the standalone mains build their parser, then parse
        made.append(self)
        raise SystemExit(0)

    argparse.ArgumentParser.parse_args = grab
    try:
        for main in (cli_serve.main, train.main):
            with pytest.raises(SystemExit):
                main([])
    finally:
        argparse.ArgumentParser.parse_args = real
    out = []

    def walk(p):
        out.append(p)
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sp in a.choices.values():
                    walk(sp)

    from adaptrubric_local.cli import build_parser

    for p in [build_parser(), *made]:
        walk(p)
    return out


def _run(capsys, *argv) -> tuple[int, str]:
    from adaptrubric_local.cli import main

    with pytest.raises(SystemExit) as ei:
        main(list(argv))
    return ei.value.code, capsys.readouterr().err


def test_every_parser_refuses_abbreviations():
    from adaptrubric_local.flags import Parser

    parsers = _all_parsers()
    assert len(parsers) > 20
    for p in parsers:
        assert isinstance(p, Parser) and p.allow_abbrev is False, p.prog


def test_an_abbreviation_is_refused_with_the_flags_it_could_mean(capsys):
    code, err = _run(capsys, "score", "d.jsonl", "--out", "v.jsonl", "--max-im", "3")
    assert code == 2 and "unrecognized arguments: --max-im 3" in err and "did you mean --max-images" in err
    # the prefix matched one flag in earlier releases; now it is refused, not silently --cue-filter/--cue-max-...
    code, err = _run(capsys, "prompt", "d.jsonl", "--id", "a", "--cue-max", "5")
    assert code == 2 and "--cue-max-new-tokens" in err


def test_an_unknown_flag_shows_the_error_and_the_closest_names_first_then_one_line_of_usage(capsys):
    code, err = _run(capsys, "score", "d.jsonl", "--out", "v.jsonl", "--num-images", "5")
    assert code == 2 and err.splitlines() == [
        "adaptrubric score: error: unrecognized arguments: --num-images 5",
        "--num-images: did you mean --max-images?",
        "usage: adaptrubric score [options] --out OUT DATA (see adaptrubric score --help)"]
    code, err = _run(capsys, "distill", "plan", "d", "--lora-rank", "8")
    assert err.startswith("adaptrubric distill plan: error: unrecognized arguments: --lora-rank 8\n")
    assert "did you mean --lora-r" in err
    assert err.splitlines()[-1].startswith("usage: adaptrubric distill plan [options]")
    code, err = _run(capsys, "eval", "d", "--out", "o", "--zzzz")
    assert err.splitlines()[:2] == ["adaptrubric eval: error: unrecognized arguments: --zzzz",
                                    "--zzzz is not a flag of adaptrubric eval"]


def test_every_parser_answers_a_usage_error_in_a_few_lines_error_first(capsys):
    """Not argparse's full usage block (52 lines for `score`) before the error: the error line, its
    hints, then one usage line naming --help, for every command and the top level."""
    for p in _all_parsers():
        with pytest.raises(SystemExit) as ei:
            p.parse_args(["--frobnicate"])
        lines = capsys.readouterr().err.splitlines()
        assert ei.value.code == 2 and lines[0].startswith(f"{p.prog}: error: "), (p.prog, lines)
        assert lines[-1].startswith(f"usage: {p.prog} [options]") and lines[-1].endswith(f"(see {p.prog} --help)")
        assert len(lines) <= 3 and not any(line.startswith("usage:") for line in lines[:-1]), (p.prog, lines)
        if "unrecognized arguments" in lines[0]:
            assert lines[1].startswith("--frobnicate"), (p.prog, lines)
# ----------------------------------------------------------------------------- help text
def _helps():
    """(parser prog, action, its help as printed) for every flag of every parser."""
    for p in _all_parsers():
        fmt = p._get_formatter()
        for a in p._actions:
            if a.help not in (None, argparse.SUPPRESS) and not isinstance(a, argparse._SubParsersAction):
                yield p.prog, a, " ".join(fmt._expand_help(a).split())


def test_each_flag_states_its_default_once_and_as_parsed():
    import re

    bad = []
    for prog, a, text in _helps():
        flag = "/".join(a.option_strings) or a.dest
        if len(re.findall(r"\bdefault", text, re.I)) > 1 or re.search(r"\b(\w+) \1\b", text):
            bad.append((prog, flag, text))  # two defaults, or a doubled word ("at at")
        m = re.search(r"\(default (?!:)([^;)]+)[;)]", text)
        if m and a.default is not None and not isinstance(a.default, (list, tuple)):
            shown = {True: "on", False: "off"}.get(a.default, str(a.default)) if isinstance(a.default, bool) else \
                str(a.default)
            if m.group(1) != shown and not m.group(1).startswith(shown + ", "):  # "42, as in the paper"
                bad.append((prog, flag, f"shows {m.group(1)!r}, parses {a.default!r}"))
        if "none: no limit" in text and a.dest in ("max_batch_tokens", "max_pixels", "max_visual_tokens"):
            bad.append((prog, flag, text))  # None means "the processor's"/"derived" there, not "no limit"
    assert bad == []


def test_every_flag_has_help_and_one_with_a_value_says_its_default():
    """`synth --help` showed no defaults (--tasks 16, --candidates 4, --seed 0 had no help at all)."""
    import re

    silent = []
    for p in _all_parsers():
        for a in p._actions:
            if not a.option_strings or isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
                continue
            if a.help is None:
                silent.append((p.prog, a.option_strings[0], "no help"))
            elif a.help != argparse.SUPPRESS and a.default not in (None, False, argparse.SUPPRESS, [], ()) and \
                    not re.search(r"\bdefault", p._get_formatter()._expand_help(a), re.I):
                silent.append((p.prog, a.option_strings[0], f"default {a.default!r} not shown"))
    assert silent == []


def test_the_batch_default_is_the_dataclass_one_and_what_help_says():
    """One default for trajectories_per_batch: PipelineConfig's, which --help shows and a run records; a
    --max-batch-size given alone sets it to 4 x that."""
    from adaptrubric_local.cli import build_parser
    from adaptrubric_local.cli.common import pipeline_config
    from adaptrubric_local.pipeline import PipelineConfig

    def parse(*flags):
        return pipeline_config(build_parser().parse_args(["score", "d.jsonl", "--out", "v.jsonl", *flags]))

    text = " ".join(build_parser()._subparsers._group_actions[0].choices["score"].format_help(every=True).split())
    assert f"at least 8 (default {PipelineConfig().trajectories_per_batch})" in text
    assert "most requests in one generate call (default 16)" in text
    assert parse().trajectories_per_batch == PipelineConfig().trajectories_per_batch == 64
    assert parse("--max-batch-size", "4").trajectories_per_batch == 16
    assert parse("--max-batch-size", "1").trajectories_per_batch == 8
    assert parse("--max-batch-size", "4", "--trajectories-per-batch", "5").trajectories_per_batch == 5


def test_every_flag_named_in_a_message_exists():
    """Every `--flag` in the package's strings (messages, help, examples, docstrings) and data files is a
    flag of one of its parsers, or of the other program named here."""
    import ast
    import re
    from pathlib import Path

    other_programs = {"--lora-modules": "vllm serve", "--no-build-isolation": "pip install",
                      "--loso": "eval/router_accuracy.py", "--traces": "OSReward's eval_pipeline/run_judge.py"}
    flags = {s for p in _all_parsers() for a in p._actions for s in a.option_strings}
    pattern = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?![\w-]|\.\w)")
    package = Path(__file__).resolve().parents[1] / "adaptrubric_local"
    unknown = []
    for f in sorted(package.rglob("*")):
        if f.suffix == ".py":
            texts = [(n.lineno, n.value) for n in ast.walk(ast.parse(f.read_text(encoding="utf-8")))
                     if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        elif f.suffix in (".yaml", ".json", ".md", ".txt", ".html", ".js"):
            texts = list(enumerate(f.read_text(encoding="utf-8").splitlines(), start=1))
            if f.suffix == ".js":  # the CSS custom properties the page's script sets are not flags
                texts = [(n, re.sub(r"setProperty\(\s*[\"']--[\w-]+", "", t)) for n, t in texts]
        else:
            continue
        allowed = {"--cue", "--field-name", "--no-field-name", "--x", "--no-x"} if f.name == "flags.py" else set()
        for line, text in texts:
            unknown += [f"{f.relative_to(package)}:{line}: {m}" for m in pattern.findall(text)
                        if m not in flags and m not in other_programs and m not in allowed]
    assert unknown == []
