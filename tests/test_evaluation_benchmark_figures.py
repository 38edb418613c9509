"""evaluation/benchmark_figures.py against values worked out by hand."""
from __future__ import annotations

import math

import pytest
from benchmark_support import benchmark_figures, point_figures, prepare

from adaptrubric_local.evaluation.benchmark_figures import HEADLINE, bootstrap_intervals, counts, render_table

# 8 trajectories; the 6th verdict is unparsed. As a failure: pairs (pred, label) are
# (1,1) tp, (1,0) fp, (0,0) tn, (0,1) fn, (1,1) tp, (0,1) fn, (0,0) tn, (1,1) tp -> TP 3, FP 1, TN 2, FN 2.
PRED = [1, 1, 0, 0, 1, None, 0, 1]
LABEL = [1, 0, 0, 1, 1, 1, 0, 1]
PLAT = ["ubuntu"] * 4 + ["web"] * 4


def test_overall_figures_by_hand():
    f = benchmark_figures(PRED, LABEL, PLAT, n_boot=200)
    o = f["overall"]
    assert f["counts"] == {"tp": 3, "fp": 1, "tn": 2, "fn": 2}
    assert f["n"] == 8 and f["n_unparsed"] == 1 and f["unparsed"] == "fail"
    assert o["acc"] == pytest.approx(62.5)  # 5/8
    assert o["prec"] == pytest.approx(75.0)  # 3/4
    assert o["rec"] == pytest.approx(60.0)  # 3/5
    assert o["f1"] == pytest.approx(200 / 3)  # 2*3 / (6+1+2)
    assert o["npv"] == pytest.approx(50.0)  # 2/(2+2)
    assert o["tnr"] == pytest.approx(200 / 3)  # 2/(2+1)
    assert o["judged_rate"] == pytest.approx(50.0)  # 4/8 predicted successes
    assert o["labelled_rate"] == pytest.approx(62.5)  # 5/8 labelled successes
    assert o["rate_gap"] == pytest.approx(-12.5)
    # kappa: po = 5/8, pe = (4*5 + 4*3)/64 = 1/2 -> (0.625-0.5)/(1-0.5)
    assert o["kappa"] == pytest.approx(0.25)
    # MCC: (3*2 - 1*2) / sqrt(4*5*3*4)
    assert o["mcc"] == pytest.approx(4 / math.sqrt(240))


def test_per_platform_acc_and_f1_by_hand():
    p = benchmark_figures(PRED, LABEL, PLAT, n_boot=10)["platforms"]
    assert list(p) == ["ubuntu", "web"]
    # ubuntu: tp, fp, tn, fn -> Acc 2/4, F1 2/(2+1+1)
    assert (p["ubuntu"]["n"], p["ubuntu"]["acc"], p["ubuntu"]["f1"]) == (4, pytest.approx(50.0), pytest.approx(50.0))
    # web with the unparsed verdict as 0: (1,1) (0,1) (0,0) (1,1) -> TP 2, FN 1, TN 1: Acc 3/4, F1 4/5
    assert (p["web"]["acc"], p["web"]["f1"]) == (pytest.approx(75.0), pytest.approx(80.0))


def test_unparsed_dropped_is_left_out_and_still_counted():
    f = benchmark_figures(PRED, LABEL, PLAT, unparsed="drop", n_boot=10)
    assert f["n"] == 7 and f["n_unparsed"] == 1
    assert f["counts"] == {"tp": 3, "fp": 1, "tn": 2, "fn": 1}
    assert f["overall"]["acc"] == pytest.approx(500 / 7)
    assert f["overall"]["f1"] == pytest.approx(75.0)  # 6 / (6+1+1)


def test_undefined_figures_are_none_not_zero():
    o = point_figures([0, 0, 0], [0, 0, 0])
    assert o["acc"] == 100.0 and o["tnr"] == 100.0 and o["npv"] == 100.0
    assert o["prec"] is None and o["rec"] is None and o["f1"] is None and o["mcc"] is None and o["kappa"] is None


def test_bad_values_are_refused():
    with pytest.raises(ValueError, match=r"labels\[1\]"):
        prepare([1, 0], [1, None])
    with pytest.raises(ValueError, match=r"predictions\[0\]"):
        prepare([2], [1])
    with pytest.raises(ValueError, match="unparsed"):
        prepare([1], [1], unparsed="zero")
    with pytest.raises(ValueError, match="one entry per trajectory"):
        prepare([1], [1, 0])


def test_bootstrap_is_seeded_and_contains_the_point():
    pred = [1, 1, 0, 0, 1, 0, 0, 1, 1, 0] * 5
    label = [1, 0, 0, 1, 1, 1, 0, 1, 1, 0] * 5
    c = counts(pred, label)
    a = bootstrap_intervals(c, n_boot=500, seed=7)
    assert a == bootstrap_intervals(c, n_boot=500, seed=7)
    assert a != bootstrap_intervals(c, n_boot=500, seed=8)
    point = point_figures(pred, label)
    for name in HEADLINE:
        low, high = a[name]
        assert low <= point[name] <= high, name
        assert low < high, name
    assert a["kappa"][0] >= -1 and a["mcc"][1] <= 1


def test_bootstrap_of_a_figure_never_defined_is_none():
    iv = bootstrap_intervals({"tp": 0, "fp": 0, "tn": 4, "fn": 0}, n_boot=50)
    assert iv["prec"] is None and iv["acc"] == (100.0, 100.0)
    assert bootstrap_intervals({"tp": 3, "fp": 1, "tn": 2, "fn": 2}, n_boot=0) == dict.fromkeys(HEADLINE)


def test_count_draws_are_the_bootstrap_of_the_rows():
    """Multinomial cell counts have the distribution of resampled rows: the intervals of both agree."""
    import numpy as np

    pred = np.array([1, 1, 0, 0, 1, 0, 0, 1, 1, 0] * 20, dtype=bool)
    label = np.array([1, 0, 0, 1, 1, 1, 0, 1, 1, 0] * 20, dtype=bool)
    iv = bootstrap_intervals(counts(pred, label), n_boot=4000, seed=1)
    idx = np.random.default_rng(2).integers(0, len(pred), size=(4000, len(pred)))
    p, y = pred[idx], label[idx]
    acc = 100 * (p == y).mean(1)
    tn, fn = (~p & ~y).sum(1), (~p & y).sum(1)
    npv = 100 * tn / (tn + fn)
    for name, rows in (("acc", acc), ("npv", npv)):
        low, high = np.percentile(rows, [2.5, 97.5])
        assert iv[name][0] == pytest.approx(low, abs=1.5) and iv[name][1] == pytest.approx(high, abs=1.5), name


def test_rendered_table_shows_table1_row_intervals_and_unparsed():
    text = render_table(benchmark_figures(PRED, LABEL, PLAT, n_boot=100, seed=3))
    lines = text.splitlines()
    assert lines[2] == ("| ubuntu Acc | ubuntu F1 | web Acc | web F1 | Overall Acc | Overall Prec | Overall Rec | "
                        "Overall F1 |")
    assert lines[4] == "| 50.0 | 50.0 | 75.0 | 80.0 | 62.5 | 75.0 | 60.0 | 66.7 |"
    assert any(line.startswith("| NPV | 50.0 | [") for line in lines)
    assert any(line.startswith("| Cohen's kappa | 0.250 | [") for line in lines)
    assert "unparsed/error/missing verdicts: 1, counted as predicted failures" in text
    assert "bootstrap: 100 resamples (multinomial over the confusion counts), seed 3" in text
    assert "| Judged - labelled success rate | -12.5 |" in text


def test_platform_order_puts_the_named_platforms_first():
    f = benchmark_figures([1, 0, 1], [1, 0, 0], ["web", "ubuntu", "android"], n_boot=5,
                          platform_order=["ubuntu", "macos", "web"])
    assert list(f["platforms"]) == ["ubuntu", "web", "android"]


def test_f1_is_undefined_where_precision_or_recall_is():
    """No predicted positive: precision is undefined, and so is F1 (as metrics.json has always said)."""
    o = point_figures([0, 0, 0], [1, 0, 1])
    assert o["prec"] is None and o["rec"] == 0.0 and o["f1"] is None and o["npv"] == pytest.approx(100 / 3)


def test_without_bootstrap_the_table_says_off():
    text = render_table(benchmark_figures(PRED, LABEL, PLAT, n_boot=0))
    assert "| Acc | 62.5 | - |" in text and "bootstrap: off" in text


def test_of_rows_reads_the_table_columns():
    """A verdict table's columns: an error verdict is a predicted failure, an unlabelled row is left out."""
    import numpy as np

    from adaptrubric_local.evaluation.benchmark_figures import of_rows
    from adaptrubric_local.evaluation.verdict_table import ERROR, OK

    rows = {"status": np.array([OK, OK, ERROR, OK], "int8"), "score": np.array([1, 0, -1, 1], "int8"),
            "label": np.array([1, 0, 1, -1], "int8"), "platform": np.array([0, 1, 1, 0], "int32")}
    f = of_rows(rows, {None: 0, "web": 1}, n_boot=0)
    assert f["counts"] == {"tp": 1, "fp": 0, "tn": 1, "fn": 1}
    assert (f["n"], f["n_unparsed"], f["unlabelled"]) == (3, 1, 1)
    assert list(f["platforms"]) == ["unknown", "web"] and f["platforms"]["web"]["acc"] == 50.0
