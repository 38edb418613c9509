"""Exact-value tests for the discrimination and efficiency metrics (evaluation/metrics.py)."""
import pytest

from adaptrubric_local.evaluation import metrics
from adaptrubric_local.types import Verdict


def V(label, score, status="ok", platform=None, **kw):
    return Verdict(id=f"{label}{score}{status}", label=label, score=score, status=status, platform=platform, **kw)


def test_confusion_and_rates():
    c = metrics.confusion([(1, 1), (1, 1), (0, 1), (0, 0), (0, 0), (0, 0), (1, 0)])
    assert c == {"tp": 2, "fp": 1, "tn": 3, "fn": 1}
    r = metrics.rates(c)
    assert r == pytest.approx({"acc": 500 / 7, "prec": 200 / 3, "rec": 200 / 3, "f1": 200 / 3, "fpr": 25.0})
    assert metrics.rates({"tp": 0, "fp": 0, "tn": 0, "fn": 0}) == {
        "acc": None, "prec": None, "rec": None, "f1": None, "fpr": None}
    assert metrics.rates({"tp": 0, "fp": 2, "tn": 1, "fn": 3}) == pytest.approx(
        {"acc": 100 / 6, "prec": 0.0, "rec": 0.0, "f1": 0.0, "fpr": 200 / 3})
    assert metrics.rates({"tp": 1, "fp": 0, "tn": 0, "fn": 3})["f1"] == pytest.approx(2 * 100 * 25 / 125)
    assert metrics.rates({"tp": 0, "fp": 1, "tn": 0, "fn": 0})["rec"] is None
    assert metrics.rates({"tp": 0, "fp": 1, "tn": 0, "fn": 0})["f1"] is None
    assert metrics.rates({"tp": 0, "fp": 0, "tn": 0, "fn": 1})["f1"] is None


def test_predicted():
    assert metrics.predicted(V(1, 1)) == 1 and metrics.predicted(V(1, 0)) == 0
    assert metrics.predicted(V(1, 1, "unparsed")) == 0
    assert metrics.predicted(V(1, None)) == 0
    assert metrics.predicted(V(1, 2)) == 0


def test_classification_and_evaluate_exact():
    vs = [V(1, 1, platform="android"), V(0, 1, platform="android"), V(1, None, "unparsed", platform="web"),
          V(0, None, "error"), V(1, 0, platform="web", hit_cap=True), V(None, 1, platform="x")]
    out = metrics.evaluate(vs)
    assert out["unlabelled"] == 1
    assert list(out["per_platform"]) == ["android", "unknown", "web"]
    o = out["overall"]
    assert {k: o[k] for k in ("n", "scored", "unparsed", "errors", "positives", "hit_cap")} == {
        "n": 5, "scored": 3, "unparsed": 1, "errors": 1, "positives": 3, "hit_cap": 1}
    assert o["confusion"] == {"tp": 1, "fp": 1, "tn": 1, "fn": 2}
    assert o["acc"] == pytest.approx(40.0) and o["prec"] == pytest.approx(50.0)
    assert o["rec"] == pytest.approx(100 / 3) and o["fpr"] == pytest.approx(50.0)
    assert o["unanswered_as_fail"] == {"fn": 1, "tn": 1}
    assert o["acc_strict"] == pytest.approx(20.0)
    assert o["scored_only"]["n"] == 3 and o["scored_only"]["confusion"] == {"tp": 1, "fp": 1, "tn": 0, "fn": 1}
    assert o["scored_only"]["acc"] == pytest.approx(100 / 3)
    web = out["per_platform"]["web"]
    assert (web["n"], web["scored"], web["unparsed"], web["confusion"]) == (2, 1, 1, {"tp": 0, "fp": 0, "tn": 0, "fn": 2})
    assert out["per_platform"]["unknown"]["errors"] == 1


def test_cost_and_efficiency():
    full = Verdict(id="a", cost_tokens=300.0, cost_calls=1.5, prompt_tokens=100, completion_tokens=5, n_images=4)
    calls_only = Verdict(id="c", cost_calls=2.0, n_images=1)
    old = Verdict(id="b", prompt_tokens=90, completion_tokens=10, n_images=2)
    err = Verdict(id="e", status="error")
    unparsed0 = Verdict(id="u", status="unparsed")
    assert metrics._cost(full) == (300.0, 1.5, True)
    assert metrics._cost(calls_only) == (0.0, 2.0, True)
    assert metrics._cost(old) == (100.0, 1.0, False)
    assert metrics._cost(err) == (0.0, 0.0, False)
    assert metrics._cost(unparsed0) == (0.0, 1.0, False)
    e = metrics.efficiency([full, old, err, unparsed0], {"s_per_traj": 3.0})
    assert e == pytest.approx({"trajectories": 4, "tokens": 400.0, "calls": 3.5, "tokens_per_traj": 100.0,
                               "calls_per_traj": 0.875, "images_per_traj": 1.5, "s_per_traj": 3.0,
                               "minutes": 0.2, "accounting": "mixed: 1 of 4 verdicts carry all model calls, "
                                                             "the rest the verifier's only"})
    assert "s_per_traj" not in metrics.efficiency([full], {"s_per_traj": None})
    assert "minutes" not in metrics.efficiency([full], None)
    empty = metrics.efficiency([])
    assert empty["tokens_per_traj"] == 0 and empty["calls_per_traj"] == 0 and empty["images_per_traj"] == 0
    assert metrics.efficiency([full, calls_only])["accounting"] == \
        "all model calls (router, cues, verifier), amortised per trajectory"
    assert metrics.efficiency([old])["accounting"] == "verifier calls only (the verdicts carry no cost fields)"
    assert empty["accounting"] == "verifier calls only (the verdicts carry no cost fields)"
