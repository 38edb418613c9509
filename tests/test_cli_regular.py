"""A regular command line (cli.py, flags.py): one name and one default per option across every
command, the data set as the first argument and --out for what a command writes, this release's old
spellings still running with one warning line, a short --help beside --help-all, options the chosen
engine does not read refused naming the one to use, and third-party noise hidden unless --verbose."""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from adaptrubric_local.cli import build_parser, main
from adaptrubric_local.flags import Parser, common

from conftest import canonical_record, write_jsonl

ROOT = Path(__file__).resolve().parents[1]

# option names that mean a different thing per command, so their defaults differ by design
PER_COMMAND = {
    "--out": "what each command writes",
    "--seed": "each command's own random draw (tts: the paper's 42)",
    "--resume": "what each command continues",
    "--val-fraction": "distill collect: the held-out split; bank refine: the validation half of DEV",
    "--tasks": "synth: how many tasks; distill train: which calls to learn",
    "--api-key-env": "serve: the service's own key; teacher commands: the teacher endpoint's key",
    "--load-in-4bit": "distill evaluate: as the adapter was trained, from its base_quantisation.json",
    "--no-load-in-4bit": "the same flag's negation",
    "--verify-max-new-tokens": "distill evaluate: the cap the collection used",
    "--router": "distill collect: model for model/url teachers, rules for labels and verdicts",
    "--model": "serve starts with the engine config's model; a one-off command names the model it runs",
    "--compare": "review: a second verdict file beside --verdicts; audit: a second audit run beside this one",
}


def leaf_commands() -> dict[str, argparse.ArgumentParser]:
    """'score' -> its parser, 'bank refine' -> its parser, ... for every leaf command."""
    out = {}

    def walk(p, path):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            out[" ".join(path)] = p
        for s in subs:
            for name, sp in s.choices.items():
                walk(sp, (*path, name))

    walk(build_parser(), ())
    return out


def shown_default(action: argparse.Action) -> str:
    """The default a person gets: what the help says ('(default 16)'), else the parser's default."""
    m = re.search(r"\(default:? ([^;)]*(?:\([^)]*\)[^;)]*)*)[;)]", action.help or "")
    text = m.group(1).strip() if m else str(action.default)
    return {"None": "none", "False": "off", "True": "on", "[]": "none"}.get(text, text)


def option_table() -> dict[str, dict[str, str]]:
    """option name -> {command: its default} over every leaf command (old spellings and help left out)."""
    table: dict[str, dict[str, str]] = {}
    for cmd, p in leaf_commands().items():
        for a in p._actions:
            if a.help == argparse.SUPPRESS:
                continue
            for name in a.option_strings:
                if name.startswith("--") and name not in ("--help", "--help-all"):
                    table.setdefault(name, {})[cmd] = shown_default(a)
    return table


def test_one_default_per_option_name_across_commands():
    table = option_table()
    assert len(table["--max-batch-size"]) >= 9 and len(leaf_commands()) >= 22
    differ = {name: per for name, per in table.items() if len(set(per.values())) > 1 and name not in PER_COMMAND}
    assert differ == {}, json.dumps(differ, indent=1)
    assert set(table["--max-batch-size"].values()) == {"16"} and "distill evaluate" in table["--max-batch-size"]


def test_the_table_sees_a_different_default():
    """The audit is not vacuous: a command that hand-writes a known option with its own default shows up."""
    p = leaf_commands()["synth"]
    a = p.add_argument("--max-batch-size", type=int, default=8, help="requests per call (default 8)")
    assert shown_default(a) == "8" and shown_default(p._option_string_actions["--tasks"]) == "16"


def test_data_sets_come_first_and_writers_take_out():
    cmds = leaf_commands()
    for cmd in ("score", "eval", "tts", "ablate", "review", "calibrate", "prompt", "labels merge", "bank refine",
                "bank induce", "distill collect"):
        first = next(a for a in cmds[cmd]._actions if not a.option_strings)
        assert first.dest == "data", cmd
    for cmd, p in cmds.items():
        visible = {s for a in p._actions if a.help != argparse.SUPPRESS for s in a.option_strings}
        assert ("--output" not in visible and "--data" not in visible) or cmd == "distill evaluate", cmd
    assert "--out" in cmds["route"]._option_string_actions and "validate" in [
        n for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
        for n, sp in a.choices["bank"]._subparsers._group_actions[0].choices.items()]


@pytest.fixture
def labelled(tmp_path):
    recs = [canonical_record(tmp_path, f"t{i}", 2, label=i % 2, task_id=f"k{i // 2}") for i in range(6)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    verdicts = write_jsonl(tmp_path / "v.jsonl", [{"id": f"t{i}", "status": "ok", "score": i % 2,
                                                    "p_success": 0.2 + 0.1 * i, "label": i % 2} for i in range(6)])
    return data, verdicts


def test_data_is_the_first_argument_and_required(labelled, tmp_path, capsys):
    data, verdicts = labelled
    assert main(["eval", str(data), "--verdicts", str(verdicts), "--out", str(tmp_path / "new"), "--no-review"]) == 0
    assert json.loads((tmp_path / "new" / "metrics.json").read_text())["overall"]["n"] == 6
    with pytest.raises(SystemExit) as exc:
        main(["eval", "--verdicts", str(verdicts), "--out", str(tmp_path / "x")])
    assert exc.value.code == 2 and "the following arguments are required: DATA" in capsys.readouterr().err


def _help_lines(capsys, monkeypatch, *argv) -> list[str]:
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(list(argv))
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("cmd", ["score", "serve"])
def test_help_fits_a_screen_and_help_all_has_every_option(cmd, capsys, monkeypatch):
    short = _help_lines(capsys, monkeypatch, cmd, "--help")
    every = _help_lines(capsys, monkeypatch, cmd, "--help-all")
    assert len(short) <= 80 < len(every), (len(short), len(every))
    text = "\n".join(short)
    for group in ("model and engine:", "method:") + (("data:", "output:") if cmd == "score" else ("service:",)):
        assert f"\n{group}\n" in text, group
    assert "--model" in text and "--max-images" in text and f"adaptrubric {cmd} --help-all" in text
    p = leaf_commands()[cmd]
    flags = {s for a in p._actions if a.help != argparse.SUPPRESS for s in a.option_strings if s.startswith("--")}
    shown = set(re.findall(r"--[a-z0-9-]+", "\n".join(every)))
    assert flags <= shown and "--max-batch-tokens" not in text and "--max-batch-tokens" in shown


def test_an_option_nobody_marked_is_in_help_all_only():
    p = Parser(prog="x")
    for k in range(30):
        p.add_argument(f"--opt-{k}", help=f"option {k}")
    common(p.add_argument("--out", help="where"), "output")
    p.add_argument("--brand-new", help="added later, by someone else")
    short, every = p.format_help(), p.format_help(every=True)
    assert "--out" in short and "--brand-new" not in short and "31 more options: x --help-all" in short
    assert "--brand-new" in every and "--opt-29" in every
    small = Parser(prog="y")
    small.add_argument("--only", help="one option")
    assert "--only" in small.format_help()  # a command with few options shows them all


@pytest.mark.parametrize("given, named", [
    (["--engine", "vllm", "--max-batch-size", "4"], "--max-num-seqs"),
    (["--engine", "vllm", "--max-batch-size", "16"], "--max-num-seqs"),  # given, even at the default value
    (["--engine", "vllm", "--max-batch-tokens", "4096"], "max_num_batched_tokens"),
    (["--engine", "vllm", "--device-map", "cuda:0"], "--tensor-parallel-size"),
    (["--max-num-seqs", "8"], "--max-batch-size"),
    (["--gpu-memory-utilization", "0.5"], "--engine vllm"),
])
def test_an_option_the_engine_does_not_read_is_an_error_naming_the_one_to_use(given, named, tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [canonical_record(tmp_path, "t0", 1)])
    assert main(["score", str(data), "--model", "m", "--out", str(tmp_path / "v.jsonl"), *given]) == 2
    err = capsys.readouterr().err
    engine = "vllm" if "vllm" in given else "transformers"
    assert err.count("\n") == 1 and named in err and f"not read by --engine {engine}" in err
    assert given[-2] in err  # the option given


def test_the_engines_defaults_are_not_an_error(tmp_path, capsys):
    """Not given is not given: --engine vllm alone passes the check (and fails later, on the missing file)."""
    assert main(["score", str(tmp_path / "none.jsonl"), "--model", "m", "--out", str(tmp_path / "v.jsonl"),
                 "--engine", "vllm"]) == 2
    err = capsys.readouterr().err
    assert "not read by" not in err and "none.jsonl" in err


NOISY = """
import logging, sys, warnings
from transformers import PretrainedConfig, PreTrainedModel
import adaptrubric_local.cli as cli

class Model(PreTrainedModel):
    config_class = PretrainedConfig

def noisy(args):
    Model(PretrainedConfig()).is_gradient_checkpointing  # transformers' own FutureWarning
    # what bitsandbytes logs on a CPU with avx512bf16 when the optional `kernels` package is missing
    logging.getLogger("bitsandbytes.backends.cpu.ops").warning(
        "Failed to load CPU gemm_4bit_forward from kernels-community: No module named 'kernels'")
    print("ran", file=sys.stderr)
    return 0

import adaptrubric_local.cli.bank as cli_bank

cli_bank.cmd_validate = noisy
if sys.argv[1:] == ["library"]:  # a Python caller: nothing filtered
    noisy(None)
else:
    sys.exit(cli.main(["bank", "validate", "x", *sys.argv[1:]]))
"""


def test_third_party_noise_is_hidden_where_the_command_line_starts(tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text(NOISY)

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("TRANSFORMERS_VERBOSITY", None)
    # the three runs at once: each spends its seconds importing transformers
    procs = [subprocess.Popen([sys.executable, str(script), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for argv in ([], ["--verbose"], ["library"])]

    try:
        errs = [p.communicate(timeout=300)[1] for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    for p, err in zip(procs, errs):
        assert p.returncode == 0, err
    quiet, loud, library = errs
    assert "ran" in quiet and "Warning" not in quiet and "gemm_4bit" not in quiet, quiet
    for err in (loud, library):
        assert "FutureWarning: `is_gradient_checkpointing` is deprecated" in err and "gemm_4bit_forward" in err
