"""The `adaptrubric` command line itself (cli.py): `route` on a file, `prompt --json`, help texts with
examples, the version, and a closed pipe ending a command with one line."""
import json
import re
import subprocess
import sys

import pytest

from adaptrubric_local.cli import build_parser, main

from conftest import canonical_record, write_jsonl


def test_validate_bank_help_has_examples(capsys):
    with pytest.raises(SystemExit):
        main(["bank", "validate", "--help"])
    assert "examples:" in capsys.readouterr().out


def test_broken_pipe_is_one_line(tmp_path):
    from adaptrubric_local.evaluation.harness import run_eval

    vf = tmp_path / "v.jsonl"
    vf.write_text(json.dumps({"id": "x", "status": "ok", "score": 1, "label": 1}) + "\n")
    run_eval(vf, tmp_path / "a")
    run_eval(vf, tmp_path / "b")
    proc = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(1); from adaptrubric_local.cli "
                             "import main; sys.exit(main(sys.argv[1:]))", "compare", str(tmp_path / "a"),
                             str(tmp_path / "b")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader goes away before anything is written, like `| head -0`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert "broken pipe" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_prompt_cli_json(tmp_path, capsys):
    import json

    rec = canonical_record(tmp_path, "p1", 14, instruction="Delete all notes in Joplin.")
    path = write_jsonl(tmp_path / "p.jsonl", [rec])
    assert main(["prompt", str(path), "--id", "p1", "--router", "rules", "--manual-cues",
                 "Check if the note list is empty.", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["category"] == "delete_cleanup" and len(out["images"]) == 10 and out["router"] == "rules"
    assert "Check if the note list is empty." in out["prompt"]
    assert main(["prompt", str(path), "--id", "nope", "--router", "rules", "--no-fine"]) == 2
    # the paper's default routes and writes cues with the model: without one, say so instead of guessing
    assert main(["prompt", str(path), "--id", "p1"]) == 2
    assert "give --model" in capsys.readouterr().err


def test_prompt_names_the_ids_it_has_when_the_id_is_not_there(tmp_path, capsys):
    one = write_jsonl(tmp_path / "one.jsonl", [canonical_record(tmp_path, "1720594731", 2)])
    assert main(["prompt", str(one), "--id", "nope", "--router", "rules", "--no-fine"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"no trajectory with id 'nope' in {one} (its only id: 1720594731)")
    many = write_jsonl(tmp_path / "many.jsonl", [canonical_record(tmp_path, f"t{k}", 2) for k in range(12)])
    assert main(["prompt", str(many), "--id", "nope", "--router", "rules", "--no-fine"]) == 2
    assert capsys.readouterr().err.strip().endswith("(ids: t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, ... (10 of 12))")


def test_route_cli_file(tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": 1, "instruction": "Delete the note Foo."}\n{"id": 2}\n'
                   '{"id": 3, "instruction": "Turn on Bluetooth."}\n')
    out = tmp_path / "out.jsonl"
    rc = main(["route", "--router", "rules", "--input", str(inp), "--out", str(out)])
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["id"], r["category"]) for r in rows] == [(1, "delete_cleanup"), (3, "state_navigation")]
    assert rc == 1 and "record line 2, field 'instruction'" in capsys.readouterr().err
    assert main(["route", "--router", "rules", "Delete the note Foo."]) == 0
    assert main(["route", "Delete the note Foo."]) == 2  # the default model router needs --model
    assert capsys.readouterr().out.strip() == "delete_cleanup"


def test_version_is_the_packages(capsys):
    from adaptrubric_local._version import __version__

    with pytest.raises(SystemExit) as ex:
        main(["--version"])
    assert ex.value.code == 0 and capsys.readouterr().out == f"adaptrubric-local {__version__}\n"
    import importlib.metadata

    assert importlib.metadata.version("adaptrubric-local") == __version__  # pyproject reads _version.py


def test_route_shows_only_the_options_routing_uses(capsys):
    with pytest.raises(SystemExit):
        main(["route", "--help-all"])
    shown = set(re.findall(r"^  (--[a-z0-9-]+)", capsys.readouterr().out, re.M))
    assert shown == {"--help-all", "--router", "--bank-path", "--explain", "--input", "--out", "--plugins", "--engine",
                     "--model", "--adapter", "--dtype", "--device-map", "--attn-implementation", "--load-in-4bit",
                     "--load-in-8bit", "--openai-url", "--openai-api-key-env", "--openai-concurrency",
                     "--openai-timeout", "--openai-max-retries"}  # no --vllm-engine-args, image budget or batch sizes


def test_no_help_text_carries_a_measured_figure(capsys, monkeypatch):
    """Figures go stale in help and belong on docs/benchmarks.md, where their command and date are: the
    --router help points there instead of quoting the rules router's accuracy."""
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: no figure split by the wrapping
    for command in build_parser().commands():
        text = command.format_help(every=True)
        figures = re.findall(r".{0,40}\d%(?! (?:Wilson )?(?:intervals?|CI)).{0,20}", text)  # a confidence level is none
        assert not figures, (command.prog, figures)
    with pytest.raises(SystemExit):
        main(["route", "--help"])
    assert "rules: keyword rules, no model call, less accurate (accuracy: docs/benchmarks.md)" in (
        capsys.readouterr().out)


def test_streams_keep_stdout_for_the_output_and_quiet_drops_only_its_lines():
    """cli/streams.py in a process of its own: what a child process writes to stdout goes to stderr, the
    command's output to stdout; with needles, their lines are dropped (this process's and the child's)."""
    code = ("import subprocess, sys; from adaptrubric_local.cli.streams import dropping_lines, output_on_stdout\n"
            "child = \"import sys; print('child out'); print('NOISE child', file=sys.stderr)\"\n"
            "with output_on_stdout(), dropping_lines(('NOISE',)):\n"
            "    subprocess.run([sys.executable, '-c', child])\n"
            "    print('NOISE here', file=sys.stderr, flush=True)\n"
            "    print('{\"output\": 1}')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"output": 1} and r.stderr == "child out\n"
