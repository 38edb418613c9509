"""The exit statuses of the commands (cli/exits.py) as the code gives them, the docs' table of them,
and `score --fail-on-error`, with the scripted engine in place of the model."""
import json
import signal
from pathlib import Path

import pytest

from adaptrubric_local import FakeEngine
from adaptrubric_local.cli import exits, main
from adaptrubric_local.engine import build

from conftest import canonical_record, write_jsonl

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fake(monkeypatch):
    eng = FakeEngine(name="fake-model")
    eng.close = lambda: None
    monkeypatch.setattr(build, "build_engine", lambda **kw: eng)
    return eng


@pytest.fixture
def one_bad(tmp_path):
    recs = [canonical_record(tmp_path, f"r{i}", 3) for i in range(3)]
    recs[1]["steps"][1]["screenshot"] = "img/missing.png"
    return write_jsonl(tmp_path / "d.jsonl", recs)


def test_fail_on_error_exits_3_with_every_line_and_the_summary_written(fake, one_bad, tmp_path, capsys):
    argv = ["score", str(one_bad), "--model", "m", "--router", "rules", "--no-fine"]
    assert main([*argv, "--out", str(tmp_path / "v.jsonl"), "--quiet"]) == exits.OK  # the default: counted
    capsys.readouterr()
    out = tmp_path / "w.jsonl"
    assert main([*argv, "--out", str(out), "--fail-on-error"]) == exits.ERROR_LINES == 3
    std = capsys.readouterr()
    assert json.loads(std.out)["errors"] == 1  # stdout is still the summary JSON
    assert f"1 error line(s) in {out} (--fail-on-error): exit 3" in std.err
    assert len(out.read_text().splitlines()) == 3
    assert json.loads(out.with_suffix(".summary.json").read_text())["errors"] == 1
    # after --resume it is the whole file that counts: the error line is still there
    assert main([*argv, "--out", str(out), "--resume", "--fail-on-error", "--quiet"]) == 3


def test_fail_on_error_passes_when_the_file_has_no_error_line(fake, tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", [canonical_record(tmp_path, f"r{i}", 3) for i in range(2)])
    assert main(["score", str(data), "--model", "m", "--out", str(tmp_path / "v.jsonl"), "--router", "rules",
                 "--no-fine", "--quiet", "--fail-on-error"]) == 0


def test_the_statuses_are_the_codes_the_commands_return(capsys, tmp_path):
    from adaptrubric_local.stopping import Stopped

    assert Stopped(signal.SIGINT).exit_code == exits.SIGINT_STATUS
    assert Stopped(signal.SIGTERM).exit_code == exits.SIGTERM_STATUS
    with pytest.raises(SystemExit) as ei:
        main(["score", "--frobnicate"])
    assert ei.value.code == exits.USAGE
    assert main(["score", str(tmp_path / "nothing.jsonl"), "--model", "m", "--out", str(tmp_path / "v")]) == exits.USAGE
    bad = tmp_path / "bank.yaml"
    bad.write_text("families: {}\n")
    assert main(["bank", "validate", str(bad)]) == exits.CHECK_FAILED


def markdown_table() -> str:
    """The docs' table of exit statuses."""
    rows = ["| status | means | given by |", "| --- | --- | --- |"]
    rows += [f"| {code} | {what} | {when} |" for code, (what, when) in exits.EXIT_STATUSES.items()]
    return "\n".join(rows)


def test_the_docs_table_of_exit_statuses_is_the_codes_table():
    page = (ROOT / "docs" / "scoring.md").read_text(encoding="utf-8")
    assert markdown_table() in page, "docs/scoring.md: paste markdown_table() of tests/test_cli_exits.py under " \
                                     "'Exit statuses'"


# ----------------------------------------------------------------------------- random-weight models
@pytest.fixture
def noisy(monkeypatch):
    """The engine writes what a random model writes: no verdict lines, up to the cap."""
    eng = FakeEngine(name="noise", script=lambda req: " ".join(["tok"] * 50))
    eng.close = lambda: None
    monkeypatch.setattr(build, "build_engine", lambda **kw: eng)
    return eng


def test_a_random_weight_tiny_models_unparsed_verdicts_are_called_noise(noisy, tiny_model, tmp_path, capsys):
    from adaptrubric_local.engine.tiny import is_random_tiny

    data = write_jsonl(tmp_path / "d.jsonl", [canonical_record(tmp_path, f"r{i}", 2) for i in range(2)])
    argv = ["score", str(data), "--router", "rules", "--no-fine", "--verify-max-new-tokens", "8", "--quiet"]
    assert is_random_tiny(tiny_model) and not is_random_tiny(tmp_path)
    assert main([*argv, "--model", str(tiny_model), "--out", str(tmp_path / "v.jsonl")]) == 0
    err = capsys.readouterr().err
    assert f"{tiny_model} is a random-weight tiny model (make-tiny-model): its outputs are noise" in err
    assert "2 unparsed verdict(s) (2 cut at the cap)" in err and "raise the cap" not in err
    # a real model's capped outputs still get the advice for a real model
    assert main([*argv, "--model", "m", "--out", str(tmp_path / "w.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "cut-off outputs are usually unparsed: raise the cap" in err and "noise" not in err


def test_the_cap_is_not_blamed_for_garbled_outputs_that_ended_before_it(monkeypatch, tmp_path, capsys):
    """Unparsed outputs that ended under the cap: the model does not write verdicts, a higher cap will not help."""
    eng = FakeEngine(name="garbled",
                     script=lambda req: " ".join(["tok"] * (50 if "/img/r0_" in str(req.images) else 3)))
    eng.close = lambda: None
    monkeypatch.setattr(build, "build_engine", lambda **kw: eng)
    data = write_jsonl(tmp_path / "d.jsonl", [canonical_record(tmp_path, f"r{i}", 2) for i in range(3)])
    assert main(["score", str(data), "--router", "rules", "--no-fine", "--verify-max-new-tokens", "8", "--quiet",
                 "--model", "m", "--out", str(tmp_path / "v.jsonl")]) == 0
    err = capsys.readouterr().err
    assert ("3 unparsed verdict(s) in this run, 2 or more of them ended before the --verify-max-new-tokens cap "
            "(8)") in err
    assert "a higher cap will not fix" in err and "raise the cap" not in err
