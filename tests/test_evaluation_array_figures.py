"""probability.py's figures over numpy arrays (evaluation/array_figures.py): the same numbers (to float
rounding: numpy sums in another order), ties and one-class data
included."""
import numpy as np
import pytest

from adaptrubric_local.evaluation import probability as PR
from adaptrubric_local.evaluation.array_figures import figures


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_array_figures_are_probability_pys(seed):
    rng = np.random.default_rng(seed)
    p = np.round(rng.random(500), 2)  # rounded: many ties, as p_success from a few tokens has
    p[:7] = [0.0, 1.0, 1.0, 0.5, 0.5, 0.5, 1 / 15]  # the ends and a bin edge
    y = (rng.random(500) < p).astype(np.int8)
    got, want = figures(p, y), PR.figures([float(x) for x in p], [int(v) for v in y])
    assert (got["n"], got["positives"], got["ece_bins"]) == (want["n"], want["positives"], want["ece_bins"])
    for k in ("auroc", "auprc", "brier", "ece"):
        assert got[k] == pytest.approx(want[k], rel=1e-12), k
    assert [(r["lo"], r["hi"], r["n"]) for r in got["reliability"]] == \
        [(r["lo"], r["hi"], r["n"]) for r in want["reliability"]]
    assert [x for r in got["reliability"] for x in (r["mean_p"], r["frac_pos"])] == pytest.approx(
        [x for r in want["reliability"] for x in (r["mean_p"], r["frac_pos"])], rel=1e-12)


def test_one_class_and_out_of_range():
    p, y = np.array([0.2, 0.9]), np.array([1, 1], np.int8)
    got = figures(p, y)
    assert got["auroc"] is None and got["auprc"] == PR.figures([0.2, 0.9], [1, 1])["auprc"]
    assert figures(p, np.zeros(2, np.int8))["auprc"] is None
    with pytest.raises(ValueError, match="probability 1.5 is outside"):
        figures(np.array([0.3, 1.5]), np.array([0, 1], np.int8))
