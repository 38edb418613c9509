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


def _benchmark_run(tmp_path):
    """8 labelled trajectories on two platforms; t5's verdict is unparsed and t7 has none (missing)."""
    from conftest import canonical_record, write_jsonl

    labels = [1, 0, 0, 1, 1, 1, 0, 1]
    plats = ["ubuntu"] * 4 + ["web"] * 4
    data = write_jsonl(tmp_path / "d.jsonl", [canonical_record(tmp_path, f"t{i}", 1, label=y, platform=p)
                                              for i, (y, p) in enumerate(zip(labels, plats))])
    scores = [1, 1, 0, 0, 1, None, 1]
    verdicts = write_jsonl(tmp_path / "v.jsonl", [
        {"id": f"t{i}", "status": "unparsed" if s is None else "ok", "score": s} for i, s in enumerate(scores)])
    return data, verdicts


def _eval(data, verdicts, out, *extra):
    assert main(["eval", str(data), "--verdicts", str(verdicts), "--out", str(out), "--no-review", *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


def test_eval_benchmark_section_by_hand(tmp_path, capsys):
    import math

    import pytest

    data, verdicts = _benchmark_run(tmp_path)
    m = _eval(data, verdicts, tmp_path / "e")
    b = m["benchmark"]
    # (pred, label) with unparsed t5 and missing t7 as predicted failures:
    # ubuntu (1,1) tp (1,0) fp (0,0) tn (0,1) fn; web (1,1) tp (0,1) fn (1,0) fp (0,1) fn
    assert b["counts"] == {"tp": 2, "fp": 2, "tn": 1, "fn": 3}
    assert (b["n"], b["n_unparsed"], b["unparsed"], b["unlabelled"]) == (8, 2, "fail", 0)
    o = b["overall"]
    expected = {"acc": 37.5, "prec": 50.0, "rec": 40.0, "f1": 400 / 9, "npv": 25.0, "tnr": 100 / 3,
                "judged_rate": 50.0, "labelled_rate": 62.5, "rate_gap": -12.5,
                "kappa": -0.25,  # po 3/8, pe (4*5 + 4*3)/64 = 1/2
                "mcc": -4 / math.sqrt(240)}  # (2*1 - 2*3) / sqrt(4*5*3*4)
    assert o == pytest.approx(expected)
    p = b["platforms"]
    assert p["ubuntu"] == pytest.approx({"n": 4, "acc": 50.0, "prec": 50.0, "rec": 50.0, "f1": 50.0})
    assert p["web"] == pytest.approx({"n": 4, "acc": 25.0, "prec": 50.0, "rec": 100 / 3, "f1": 40.0})
    for name in ("ubuntu", "web"):  # one implementation: the per-platform block says the same
        assert m["per_platform"][name]["f1"] == p[name]["f1"] and m["per_platform"][name]["acc"] == p[name]["acc"]
    assert m["overall"]["acc"] == o["acc"] and m["overall"]["f1"] == o["f1"]
    assert (b["n_boot"], b["seed"], b["confidence"]) == (1000, 0, 0.95)
    for name, (low, high) in b["intervals"].items():
        assert low <= o[name] <= high, name
    out = capsys.readouterr().out
    assert ("| ubuntu Acc | ubuntu F1 | web Acc | web F1 | Overall Acc | Overall Prec | Overall Rec | Overall F1 |"
            in out)
    assert "| 50.0 | 50.0 | 25.0 | 40.0 | 37.5 | 50.0 | 40.0 | 44.4 |" in out
    report = (tmp_path / "e" / "report.md").read_text()
    assert "## Benchmark figures" in report and "| 50.0 | 50.0 | 25.0 | 40.0 | 37.5 | 50.0 | 40.0 | 44.4 |" in report
    assert "| NPV | 25.0 | [" in report and "| MCC | -0.258 | [" in report and "| Cohen's kappa | -0.250 | [" in report
    assert "unparsed/error/missing verdicts: 2, counted as predicted failures" in report
    assert "bootstrap: 1000 resamples (multinomial over the confusion counts), seed 0" in report


def test_eval_bootstrap_is_seeded(tmp_path, capsys):
    data, verdicts = _benchmark_run(tmp_path)
    a = _eval(data, verdicts, tmp_path / "a", "--seed", "5", "--bootstrap", "300")["benchmark"]
    b = _eval(data, verdicts, tmp_path / "b", "--seed", "5", "--bootstrap", "300")["benchmark"]
    c = _eval(data, verdicts, tmp_path / "c", "--seed", "6", "--bootstrap", "300")["benchmark"]
    assert a["intervals"] == b["intervals"] != c["intervals"] and a["n_boot"] == 300 and c["seed"] == 6
    off = _eval(data, verdicts, tmp_path / "o", "--bootstrap", "0")["benchmark"]
    assert set(off["intervals"].values()) == {None} and off["overall"] == a["overall"]
    assert "bootstrap: off" in (tmp_path / "o" / "report.md").read_text()
    assert main(["eval", str(data), "--verdicts", str(verdicts), "--out", str(tmp_path / "x"),
                 "--bootstrap", "-1"]) != 0
    assert "--bootstrap must be 0" in capsys.readouterr().err


def test_eval_vote_rules_section_by_hand(tmp_path, capsys):
    """One `--votes 3` run: each rule's figures from the lines' votes, by hand; an error line and an
    undecided vote count as predicted failures, an unlabelled trajectory is left out; no votes, no section."""
    import pytest

    from conftest import canonical_record, write_jsonl

    labels = [1, 0, 1, 0, 1, 0, None]
    data = write_jsonl(tmp_path / "d.jsonl", [canonical_record(tmp_path, f"t{i}", 1, label=y)
                                              for i, y in enumerate(labels)])
    votes = [[1, 1, 1], [1, 1, 0], [1, 0, None], [0, 0, 1], None, [1, None, None], [1, 1, 1]]
    lines = []
    for i, vs in enumerate(votes):  # laid out as votes.py's `vote` writes them under the majority rule
        if vs is None:
            lines.append({"id": f"t{i}", "status": "error", "error": "engine failed"})
            continue
        ones, zeros = vs.count(1), vs.count(0)
        score = None if ones == zeros else int(ones > zeros)
        lines.append({"id": f"t{i}", "status": "unparsed" if score is None else "ok", "score": score, "votes": vs,
                      "vote_rule": "majority", "vote_share": ones / (ones + zeros)})
    m = _eval(data, write_jsonl(tmp_path / "v.jsonl", lines), tmp_path / "e", "--bootstrap", "0")
    # predictions (u: undecided -> 0; t4 the error line: u under every rule), labels 1 0 1 0 1 0:
    # majority 1 1 u 0 u 1   all 1 0 0 0 u u   any 1 1 1 1 u 1   at-least-2 1 1 u 0 u u
    by_hand = {
        "majority": dict(tp=1, fp=2, tn=1, fn=2, undecided=2, precision=100 / 3, recall=100 / 3, npv=100 / 3,
                         tnr=100 / 3),
        "all": dict(tp=1, fp=0, tn=3, fn=2, undecided=2, precision=100.0, recall=100 / 3, npv=60.0, tnr=100.0),
        "any": dict(tp=2, fp=3, tn=0, fn=1, undecided=1, precision=40.0, recall=200 / 3, npv=0.0, tnr=0.0),
        "at-least-2": dict(tp=1, fp=1, tn=2, fn=2, undecided=3, precision=50.0, recall=100 / 3, npv=50.0,
                           tnr=200 / 3),
    }
    assert [f["rule"] for f in m["vote_rules"]] == list(by_hand)
    for f in m["vote_rules"]:
        assert f == {"rule": f["rule"], "n": 6, **{k: pytest.approx(v) for k, v in by_hand[f["rule"]].items()}}
    c = m["overall"]["confusion"]  # the lines' own verdicts are the majority rule's
    assert {k: by_hand["majority"][k] for k in c} == c
    row = "| all | 100.0 | 33.3 | 60.0 | 100.0 | 1 | 0 | 3 | 2 | 2 |"
    assert row in capsys.readouterr().out
    report = (tmp_path / "e" / "report.md").read_text()
    assert "## Vote rules" in report and row in report
    assert "| any | 40.0 | 66.7 | 0.0 | 0.0 | 2 | 3 | 0 | 1 | 1 |" in report

    data, verdicts = _benchmark_run(tmp_path / "plain")
    m = _eval(data, verdicts, tmp_path / "p", "--bootstrap", "0")
    assert "vote_rules" not in m and "Vote rules" not in capsys.readouterr().out
    assert "Vote rules" not in (tmp_path / "p" / "report.md").read_text()
