"""`adaptrubric eval`, `tts` and `compare` (cli_eval.py): the reports they write from verdict files."""
import json

from adaptrubric_local.cli import main

from conftest import METRIC_SET, TTS_SET, hand_verdict


def _verdict_file(path, verdicts):
    path.write_text("".join(json.dumps(v.to_dict()) + "\n" for v in verdicts))
    return path


def test_eval_and_tts_commands_write_reports(tmp_path, capsys):
    vf = _verdict_file(tmp_path / "v.jsonl", METRIC_SET)
    assert main(["eval", str(tmp_path / "none"), "--verdicts", str(vf), "--out", str(tmp_path / "e")]) == 2
    capsys.readouterr()
    # without --data the labels in the verdict lines are used
    from adaptrubric_local.evaluation.harness import run_eval, run_tts

    m = run_eval(vf, tmp_path / "e")
    for f in ("metrics.json", "report.md", "confusion.png", "per_platform.png", "run.json"):
        assert (tmp_path / "e" / f).is_file()
    saved = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert set(saved["overall"]) >= {"acc", "prec", "rec", "f1", "fpr", "n", "unparsed"}
    assert saved["overall"]["acc"] == m["overall"]["acc"] == 60.0
    assert saved["overall"]["scored_only"]["acc"] == 62.5
    report = (tmp_path / "e" / "report.md").read_text()
    assert "package_version" in saved["run"] and "| web | 3 | 0 |" in report
    assert "| 10 | 8 | 1 | 1 | 0 | 60.0 | 50.0 | 50.0 | 50.0 | 33.3 |" in report  # headline row, all n
    assert "| 8 | 62.5 | 50.0 | 66.7 | 57.1 | 40.0 | 50.0 |" in report  # scored-only row
    assert "1 of them are successful trajectories (false negatives), 1 failed ones" in report
    from dataclasses import replace

    # a verdict file holds one line per id (readers keep the last), so ids are made unique across tasks
    tf = _verdict_file(tmp_path / "t.jsonl", [replace(v, id=f"{v.task_id}-{v.id}") for v in TTS_SET])
    r = run_tts(tf, tmp_path / "t", seed=None)
    saved = json.loads((tmp_path / "t" / "tts.json").read_text())
    assert saved["oracle"]["2"] == 75.0 and (tmp_path / "t" / "tts.png").is_file() and r["pool"]["mixed"] == 3


def test_compare(tmp_path):
    from adaptrubric_local.evaluation.compare import compare
    from adaptrubric_local.evaluation.harness import run_eval

    a = run_eval(_verdict_file(tmp_path / "a.jsonl", METRIC_SET), tmp_path / "A")
    changed = [hand_verdict(v.id, v.label, 1 if v.status == "ok" else None, v.status, v.platform) for v in METRIC_SET]
    run_eval(_verdict_file(tmp_path / "b.jsonl", changed), tmp_path / "B")
    text = compare(tmp_path / "A", tmp_path / "B")
    row = next(line for line in text.splitlines() if line.startswith("overall.acc "))
    # all 8 scored predicted 1: the 3 scored positives right, plus the error verdict on a failure (predicted 0)
    assert row.split()[1:] == ["60.00", "40.00", "-20.00"]
    row = next(line for line in text.splitlines() if line.startswith("overall.scored_only.acc "))
    assert row.split()[1:] == ["62.50", "37.50", "-25.00"]
    assert next(line for line in text.splitlines() if line.startswith("package_version")).count("0.1.0") == 2
    n = next(line for line in text.splitlines() if line.startswith("overall.n "))
    assert n.split()[1:] == ["10", "10", "+0"]  # counts print as counts, not 10.00
    assert a["overall"]["acc"] == 60.0
