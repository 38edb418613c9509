"""`eval`, `tts` and `review` over the data set given (evaluation/coverage.py): every labelled trajectory
of --data in the denominator, those without a verdict counted as missing (predicted failures, the
paper's fixed denominators), verdicts for ids the data lacks refused (or left out with --allow-extra),
and --subset verdicts evaluating only what the verdicts cover, saying so."""
import json

import pytest

from adaptrubric_local import Verdict
from adaptrubric_local.cli import main

from conftest import canonical_record, write_jsonl


@pytest.fixture
def ten(tmp_path):
    """10 labelled trajectories (t0-t4 successes, t5-t9 failures, two per task) and a verdict file covering
    two of them, as a run killed midway leaves it: t0 judged a success (TP), t5 a success too (FP)."""
    recs = [canonical_record(tmp_path, f"t{i}", 2, instruction=f"Task {i // 2}.", label=int(i < 5),
                             platform="android", task_id=f"task{i // 2}") for i in range(10)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    vs = [Verdict(id="t0", score=1, p_success=0.9), Verdict(id="t5", score=1, p_success=0.8)]
    vfile = write_jsonl(tmp_path / "v.jsonl", [json.dumps(v.to_dict()) for v in vs])
    return data, vfile


def _headline(out: str) -> dict:
    line = next(x for x in out.splitlines() if x.startswith("n="))
    return dict(kv.split("=") for kv in line.split("|")[0].split() if "=" in kv)  # the headline, not scored-only


def test_eval_over_the_data_counts_trajectories_without_a_verdict_as_missing(ten, tmp_path, capsys):
    data, vfile = ten
    assert main(["eval", str(data), "--verdicts", str(vfile), "--out", str(tmp_path / "e"), "--quiet"]) == 0
    out, err = capsys.readouterr()
    h = _headline(out)
    # the paper's protocol: all 10 classified; the 8 without a verdict are predicted failures, so
    # TP=1 (t0), FP=1 (t5), FN=4 (t1-t4), TN=4 (t6-t9)
    assert (h["n"], h["scored"], h["missing"], h["unparsed"], h["errors"]) == ("10", "2", "8", "0", "0")
    assert (h["acc"], h["prec"], h["rec"], h["f1"], h["fpr"]) == ("50.0", "50.0", "20.0", "28.6", "20.0")
    assert "WARNING: 8 of the 10 trajectories in" in err and "(first: t1, t2, t3, t4, t6, ... (3 more))" in err
    m = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert m["overall"]["confusion"] == {"tp": 1, "fp": 1, "tn": 4, "fn": 4} and m["overall"]["missing"] == 8
    assert m["coverage"]["missing"] == ["t1", "t2", "t3", "t4", "t6", "t7", "t8", "t9"]
    assert m["probability"]["p_success"]["n"] == 2 and m["efficiency"]["trajectories"] == 2  # the file's verdicts
    report = (tmp_path / "e" / "report.md").read_text()
    assert "| 10 | 2 | 0 | 0 | 8 | 50.0 | 50.0 | 20.0 | 28.6 | 20.0 |" in report and "have no verdict" in report


def test_subset_verdicts_evaluates_the_covered_trajectories_and_says_so(ten, tmp_path, capsys):
    data, vfile = ten
    assert main(["eval", str(data), "--verdicts", str(vfile), "--out", str(tmp_path / "e"), "--quiet",
                 "--subset", "verdicts"]) == 0
    out, err = capsys.readouterr()
    h = _headline(out)
    assert (h["n"], h["missing"], h["acc"], h["prec"], h["rec"], h["fpr"]) == ("2", "0", "50.0", "50.0", "100.0",
                                                                              "100.0")
    assert "--subset verdicts: evaluated on the 2 trajectories" in err and "of 10 in" in err
    report = (tmp_path / "e" / "report.md").read_text()
    assert "not the paper's fixed denominator" in report


def test_verdicts_for_ids_not_in_the_data_are_an_error_or_left_out(ten, tmp_path, capsys):
    _, vfile = ten
    other = write_jsonl(tmp_path / "o" / "d.jsonl", [canonical_record(tmp_path / "o", "x", 2, label=1)])
    assert main(["eval", str(other), "--verdicts", str(vfile), "--out", str(tmp_path / "e"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "holds verdicts for 2 id(s) that are not in" in err and "(first: t0, t5)" in err and "--allow-extra" in err
    assert main(["eval", str(other), "--verdicts", str(vfile), "--out", str(tmp_path / "e"), "--quiet",
                 "--allow-extra"]) == 0
    out, err = capsys.readouterr()
    assert _headline(out)["n"] == "1" and _headline(out)["missing"] == "1"
    assert "2 verdict id(s) in" in err and "left out (--allow-extra)" in err


def test_tts_over_the_data_and_without_it(ten, tmp_path, capsys):
    data, vfile = ten
    assert main(["tts", str(data), "--verdicts", str(vfile), "--out", str(tmp_path / "t"), "--quiet"]) == 0
    res = json.loads((tmp_path / "t" / "tts.json").read_text())
    assert res["pool"]["tasks"] == 5 and res["pool"]["missing"] == 8 and res["pool"]["scored"] == 2
    assert res["classification"]["n"] == 10 and "have no verdict" in capsys.readouterr().err
    # without --data the verdicts' own labels and tasks are used, and the report says so
    labelled = [Verdict(id=f"c{i}", score=i % 2, label=1, task_id="T") for i in range(2)]
    own = write_jsonl(tmp_path / "own.jsonl", [json.dumps(v.to_dict()) for v in labelled])
    assert main(["tts", "--verdicts", str(own), "--out", str(tmp_path / "t2"), "--quiet"]) == 0
    assert "no data set given: the labels" in capsys.readouterr().err
    assert "no data set given: the labels" in (tmp_path / "t2" / "report.md").read_text()


def test_review_over_the_data_shows_the_missing_trajectories(ten, tmp_path, capsys):
    data, vfile = ten
    assert main(["review", str(data), "--verdicts", str(vfile), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("10 cards: TP=1 FP=1 FN=0 TN=0 unparsed=0 error=0 missing=8 ")
    index = json.loads((tmp_path / "r" / "review_files" / "index.js").read_text().split("=", 1)[1].rstrip().rstrip(";"))
    assert index["counts"]["missing"] == 8 and index["n"] == 10

