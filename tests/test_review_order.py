"""Which cards a person labels first (`review --order`): each order on crafted verdicts, the budget,
labelled trajectories after unlabelled ones, the page written in that order with each card's reason
and the compared verdict, and eval/label_order.py (what the order buys) at a small size."""
import importlib.util
import json
from pathlib import Path

import pytest

from adaptrubric_local import Verdict
from adaptrubric_local.cli import main
from adaptrubric_local.evaluation.review_order import ReviewOrderConfig, arrange

from conftest import canonical_record, write_jsonl

ROOT = Path(__file__).resolve().parents[1]


def _v(i, score=1, p=None, label=None, status="ok", cal=None):
    return Verdict(id=f"t{i}", score=score if status == "ok" else None, p_success=p, label=label, status=status,
                   p_success_calibrated=cal)


def _ids(rows):
    return [v.id for v, _ in rows]


def test_uncertain_nearest_half_first_calibrated_when_present_labelled_last():
    vs = [_v(0, p=0.9), _v(1, p=0.45), _v(2, p=None), _v(3, p=0.99, cal=0.52), _v(4, p=0.5, label=1),
          _v(5, score=0, p=0.2), _v(6, status="unparsed", p=0.49)]
    rows = arrange(vs, "uncertain")
    assert _ids(rows) == ["t6", "t3", "t1", "t5", "t0", "t2", "t4"]  # t3 by its calibrated 0.52, not 0.99
    assert rows[1][1] == "|p - 0.5| = 0.020" and rows[5][1] == "no probability"
    assert _ids(arrange(vs, "uncertain", budget=2)) == ["t6", "t3"]


def test_fp_first_is_the_pages_sort():
    vs = [_v(0, 1, 0.9, label=1), _v(1, 1, 0.7, label=0), _v(2, 0, 0.1, label=1), _v(3, 1, 0.95, label=0),
          _v(4, status="unparsed", label=1), _v(5, status="error", label=0), _v(6, 0, 0.2, label=0), _v(7, 1, 0.9)]
    rows = arrange(vs, "fp-first")
    assert _ids(rows) == ["t3", "t1", "t2", "t4", "t5", "t0", "t6", "t7"]
    assert rows[0][1] == "FP, confidence of the error 0.950"


def test_disagree_different_scores_first_then_one_sided_then_agreeing():
    a = [_v(0, 1, 0.9), _v(1, 1, 0.6), _v(2, 0, 0.3), _v(3, 1, 0.8), _v(4, status="unparsed"), _v(5, 1, 0.7, label=0)]
    b = {"t0": _v(0, 0, 0.1), "t1": _v(1, 0, 0.4), "t2": _v(2, 0, 0.05), "t3": _v(3, status="unparsed"),
         "t4": _v(4, 1, 0.9), "t5": _v(5, 0, 0.1)}
    rows = arrange(a, "disagree", compare=b)
    assert _ids(rows) == ["t0", "t1", "t3", "t4", "t2", "t5"]
    assert rows[0][1] == "SCORE 1 vs 0, |pA - pB| = 0.800" and rows[2][1] == "SCORE 1 vs unparsed"
    rows = arrange(a[:1] + [_v(9, 1, 0.5)], "disagree", compare=b)
    assert rows[1][1] == "no verdict in the compared file"
    with pytest.raises(ValueError, match="second verdict file"):
        arrange(a, "disagree")


def test_random_is_seeded_and_puts_labelled_last():
    vs = [_v(i, p=0.5, label=1 if i < 3 else None) for i in range(20)]
    first = _ids(arrange(vs, "random", seed=1))
    assert first == _ids(arrange(vs, "random", seed=1)) and first != _ids(arrange(vs, "random", seed=2))
    assert set(first[-3:]) == {"t0", "t1", "t2"} and sorted(first) == sorted(v.id for v in vs)


def test_the_config_says_what_is_missing():
    with pytest.raises(ValueError, match="give --order too"):
        ReviewOrderConfig(budget=5)
    with pytest.raises(ValueError, match="needs --compare"):
        ReviewOrderConfig(order="disagree")
    with pytest.raises(ValueError, match="at least 1"):
        ReviewOrderConfig(order="random", budget=0)
    with pytest.raises(ValueError, match="one of"):
        ReviewOrderConfig(order="confident")


def _index(out: Path) -> dict:
    text = (out / "review_files" / "index.js").read_text()
    return json.loads(text[text.index("=") + 1:].rstrip().rstrip(";"))


def test_review_writes_the_budgeted_order_with_reasons_and_the_compared_verdict(tmp_path, capsys):
    recs = [canonical_record(tmp_path, f"t{i}", 2, label=1 if i == 0 else None) for i in range(6)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    ps = [0.5, 0.9, 0.55, 0.1, 0.35, 0.61]
    va = write_jsonl(tmp_path / "a.jsonl", [{"id": f"t{i}", "status": "ok", "score": int(p >= 0.5), "p_success": p}
                                            for i, p in enumerate(ps)])
    vb = write_jsonl(tmp_path / "b.jsonl", [{"id": f"t{i}", "status": "ok", "score": 1, "p_success": 0.7,
                                             "model": "teacher"} for i in range(6)])
    out = tmp_path / "r"
    assert main(["review", str(data), "--verdicts", str(va), "--out", str(out), "--order", "uncertain",
                 "--budget", "3", "--compare", str(vb), "--quiet"]) == 0
    assert "cards in uncertain order against" in capsys.readouterr().out
    idx = _index(out)
    assert [r[0] for r in idx["rows"]] == ["t2", "t5", "t4"]  # t0 (0.50) is labelled already: after the rest
    assert idx["meta"]["order"] == {"order": "uncertain", "budget": 3, "of": 6, "shown": 3, "compare": str(vb),
                                    "seed": None}
    cards = json.loads((out / "review_files" / "cards" / "00000.js").read_text().split(", ", 1)[1].rsplit(");", 1)[0])
    assert [c["rank"] for c in cards] == [1, 2, 3] and cards[0]["rank_reason"] == "|p - 0.5| = 0.050"
    assert cards[2]["compare"] == {"score": 1, "status": "ok", "model": "teacher", "p_success": 0.7}
    assert main(["review", str(data), "--verdicts", str(va), "--out", str(out), "--order", "disagree",
                 "--compare", str(vb), "--quiet"]) == 0
    assert [r[0] for r in _index(out)["rows"]][:3] == ["t3", "t4", "t1"]  # B says 1 where A says 0, widest first
    assert main(["review", str(data), "--verdicts", str(va), "--out", str(out), "--budget", "3"]) == 2
    assert "give --order too" in capsys.readouterr().err


def test_a_budgeted_review_prints_the_counts_of_the_cards_it_wrote(tmp_path, capsys):
    """--budget over a data set that a labels file labels and the verdicts cover in part: the terminal's
    chips are the page's (the cards written, missing ones included), the headline is over every verdict."""
    recs = [canonical_record(tmp_path, f"t{i}", 2) for i in range(6)]  # no labels in the data
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    labels = write_jsonl(tmp_path / "labels.jsonl", [{"id": f"t{i}", "label": i % 2} for i in range(6)])
    va = write_jsonl(tmp_path / "a.jsonl", [{"id": f"t{i}", "status": "ok", "score": 1, "p_success": 0.5 + i / 10}
                                            for i in range(4)])  # t4, t5 have no verdict
    out = tmp_path / "r"
    assert main(["review", str(data), "--labels", str(labels), "--verdicts", str(va), "--out", str(out),
                 "--order", "fp-first", "--budget", "3", "--quiet"]) == 0
    first, second = capsys.readouterr().out.splitlines()[:2]
    idx = _index(out)
    assert idx["n"] == 3 and [r[0] for r in idx["rows"]] == ["t2", "t0", "t4"]  # FP most confident first, then missing
    printed = dict(kv.split("=") for kv in first.split(":", 1)[1].split("(")[0].split())
    assert printed == {k: str(v) for k, v in idx["counts"].items() if v or k not in ("missing", "unlabelled")}
    assert first.startswith("3 cards (of 6 verdicts): TP=0 FP=2 FN=0 TN=0 unparsed=0 error=0 missing=1 ")
    assert second.startswith("eval's headline over all 6 ") and second.endswith("TP=2 FP=2 FN=1 TN=1")


def test_label_order_script_in_its_ci_size(capsys):
    spec = importlib.util.spec_from_file_location("label_order", ROOT / "eval" / "label_order.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--ci"]) == 0
    res = mod.main.result
    out = capsys.readouterr().out
    assert "held-out ECE" in out and "wrong verdicts among the first 50 cards" in out
    errors = {k: sum(v) / len(v) for k, v in res["errors"].items()}
    assert errors["fp-first"] == 50  # it sorts by outcome: every card is a mistake when there are 50
    assert errors["uncertain"] > 1.5 * errors["random"]  # near p = 0.5 the synthetic verifier is wrong half the time
    assert all(len(v) == 3 for v in res["calibration"].values())
