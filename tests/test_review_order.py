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


def test_uncertain_nearest_half_first_calibrated_when_present_what_the_labels_files_decided_last():
    vs = [_v(0, p=0.9), _v(1, p=0.45), _v(2, p=None), _v(3, p=0.99, cal=0.52), _v(4, p=0.5, label=1),
          _v(5, score=0, p=0.2), _v(6, status="unparsed", p=0.49)]
    rows = arrange(vs, "uncertain")  # t4's label is the data's: no person's decision, it does not move the card
    assert _ids(rows) == ["t4", "t6", "t3", "t1", "t5", "t0", "t2"]  # t3 by its calibrated 0.52, not 0.99
    assert rows[2][1] == "|p - 0.5| = 0.020" and rows[6][1] == "no probability"
    rows = arrange(vs, "uncertain", reviewed={"t4": 1, "t1": None})  # a labels file: t4 labelled, t1 unsure
    assert _ids(rows) == ["t6", "t3", "t5", "t0", "t2", "t1", "t4"]
    assert rows[5][1] == "|p - 0.5| = 0.050; marked unsure in the labels files"
    assert rows[6][1] == "|p - 0.5| = 0.000; labelled in the labels files"
    assert _ids(arrange(vs, "uncertain", budget=2, reviewed={"t4": 0})) == ["t6", "t3"]


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
    rows = arrange(a, "disagree", compare=b, reviewed={"t5": 0})  # t5 labelled in a labels file: last
    assert _ids(rows) == ["t0", "t1", "t3", "t4", "t2", "t5"]
    assert rows[0][1] == "SCORE 1 vs 0, |pA - pB| = 0.800" and rows[2][1] == "SCORE 1 vs unparsed"
    rows = arrange([*a[:1], _v(9, 1, 0.5)], "disagree", compare=b)
    assert rows[1][1] == "no verdict in the compared file"
    with pytest.raises(ValueError, match="second verdict file"):
        arrange(a, "disagree")


def test_random_is_seeded_and_puts_what_the_labels_files_label_last():
    vs = [_v(i, p=0.5, label=1) for i in range(20)]
    done = {"t0": 1, "t1": 0, "t2": None}
    first = _ids(arrange(vs, "random", seed=1, reviewed=done))
    assert first == _ids(arrange(vs, "random", seed=1, reviewed=done))
    assert first != _ids(arrange(vs, "random", seed=2, reviewed=done))
    assert set(first[-2:]) == {"t0", "t1"} and first[-3] == "t2" and sorted(first) == sorted(v.id for v in vs)
    assert set(_ids(arrange(vs, "random", seed=1))[-3:]) != {"t0", "t1", "t2"}  # the data's labels: no order


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
    assert [r[0] for r in _index(out)["rows"]] == ["t0", "t2", "t5"]  # t0's label is the data's: it does not count
    done = write_jsonl(tmp_path / "labels.jsonl", [{"id": "t0", "label": 1, "note": "seen"}])
    assert main(["review", str(data), "--verdicts", str(va), "--out", str(out), "--order", "uncertain",
                 "--budget", "3", "--compare", str(vb), "--labels", str(done), "--quiet"]) == 0
    idx = _index(out)
    assert [r[0] for r in idx["rows"]] == ["t2", "t5", "t4"]  # t0 (0.50) is labelled in the file: after the rest
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


def _androidgen_labelled(root: Path, n: int) -> Path:
    """AndroidGen-shaped data (a folder per trace, record.jsonl per folder) whose labels come with it
    (root/labels.jsonl: trace_id, label), every trajectory labelled, as the real AndroidGen set is."""
    from conftest import make_png

    for k in range(n):
        tid = str(1720000000 + k)
        rows = []
        for i in range(3):
            make_png(root / tid / "screenshots" / f"{i}.png", seed=k * 10 + i)
            op = {"operation": "exit", "kwargs": {"message": "done"}} if i == 2 else \
                {"operation": "do", "action": "Click", "kwargs": {"element_id": "1"}}
            rows.append({"instruction": f"Open app {k}.", "index": i, "trace_id": int(tid),
                         "image": f"{tid}/screenshots/{i}.png", "parsed_action": op})
        write_jsonl(root / tid / "record.jsonl", rows)
    write_jsonl(root / "labels.jsonl", [{"trace_id": 1720000000 + k, "label": int(k % 3 != 0)} for k in range(n)])
    return root


def test_two_labelling_batches_on_data_that_comes_labelled_share_no_id(tmp_path, capsys):
    """The issue's case: on AndroidGen (labels in the data) the second `--order uncertain --budget 5` batch,
    given the first batch's labels file, wrote the same 5 ids. The data's labels are no person's decision:
    batch 2 is the next 5 by uncertainty, and its page carries the labels file's labels and notes."""
    from adaptrubric_local.formats import load_trajectories

    data = _androidgen_labelled(tmp_path / "androidgen", 12)
    ids = [t.id for t in load_trajectories(data).trajectories]
    assert len(ids) == 12 and all(t.label in (0, 1) for t in load_trajectories(data).trajectories)
    ps = {i: round(0.5 + (-1) ** k * 0.03 * (k + 1), 3) for k, i in enumerate(ids)}  # nearest 0.5: file order
    vfile = write_jsonl(tmp_path / "v.jsonl", [{"id": i, "status": "ok", "score": int(p >= 0.5), "p_success": p}
                                               for i, p in ps.items()])
    by_uncertainty = sorted(ids, key=lambda i: abs(ps[i] - 0.5))

    def batch(out, *labels):
        args = [x for f in labels for x in ("--labels", str(f))]
        assert main(["review", str(data), "--verdicts", str(vfile), "--out", str(out), "--order",
                     "uncertain", "--budget", "5", *args, "--quiet"]) == 0
        return _index(out)

    first = batch(tmp_path / "label-1")
    one = [r[0] for r in first["rows"]]
    assert one == by_uncertainty[:5] and "labels" not in first["meta"]
    done = write_jsonl(tmp_path / "labels-1.jsonl", [{"id": i, "label": k % 2, "note": f"batch 1 card {k}"}
                                                     for k, i in enumerate(one[:4])]
                       + [{"id": one[4], "label": None, "note": "cannot tell"}])
    second = batch(tmp_path / "label-2", done)
    two = [r[0] for r in second["rows"]]
    assert not set(one) & set(two) and two == by_uncertainty[5:10]
    assert second["meta"]["labels"]["files"] == ["labels-1.jsonl"] and second["meta"]["labels"]["marks"] == {}
    more = write_jsonl(tmp_path / "labels-2.jsonl", [{"id": i, "label": 1} for i in two])
    third = [r[0] for r in batch(tmp_path / "label-3", done, more)["rows"]]
    assert third == [*by_uncertainty[10:], one[4], *by_uncertainty[:2]]  # then unsure, then labelled, by p
    # a page written with --labels over every card: the labels and notes on the cards they label
    assert main(["review", str(data), "--verdicts", str(vfile), "--out", str(tmp_path / "all"),
                 "--labels", str(done), "--quiet"]) == 0
    marks = _index(tmp_path / "all")["meta"]["labels"]["marks"]
    assert {i: (m["label"], m["note"]) for i, m in marks.items()} == \
        {i: ([0, 1, 0, 1][k] if k < 4 else None, f"batch 1 card {k}" if k < 4 else "cannot tell")
         for k, i in enumerate(one)}
