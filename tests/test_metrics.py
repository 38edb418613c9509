"""Discrimination and efficiency metrics (evaluation/metrics.py) against values worked out by hand:
unparsed and error verdicts count as failures, costs per trajectory, F1 at its edges."""

from dataclasses import replace

import numpy as np
import pytest

from adaptrubric_local import Verdict
from adaptrubric_local.evaluation import metrics

from conftest import METRIC_SET, hand_verdict


def test_metrics_by_hand():
    m = metrics.evaluate(METRIC_SET)
    o = m["overall"]
    # headline: every trajectory classified; u2 (label 1, unparsed) is a false negative, u3 (label 0,
    # error) a true negative
    assert o["confusion"] == {"tp": 2, "fp": 2, "tn": 4, "fn": 2}
    assert o["unanswered_as_fail"] == {"fn": 1, "tn": 1}
    assert (o["n"], o["scored"], o["unparsed"], o["errors"]) == (10, 8, 1, 1)
    assert o["acc"] == pytest.approx(60.0) and o["prec"] == pytest.approx(50.0)
    assert o["rec"] == pytest.approx(50.0) and o["f1"] == pytest.approx(50.0)
    assert o["fpr"] == pytest.approx(100 / 3) and o["acc_strict"] == pytest.approx(50.0)
    s = o["scored_only"]  # the scored verdicts alone
    assert s["n"] == 8 and s["confusion"] == {"tp": 2, "fp": 2, "tn": 3, "fn": 1}
    assert s["acc"] == pytest.approx(62.5) and s["prec"] == pytest.approx(50.0)
    assert s["rec"] == pytest.approx(200 / 3) and s["f1"] == pytest.approx(400 / 7) and s["fpr"] == pytest.approx(40.0)
    a = m["per_platform"]["android"]
    assert (a["acc"], a["prec"], a["rec"], a["f1"], a["fpr"]) == (50.0, 50.0, 50.0, 50.0, 50.0)
    w = m["per_platform"]["web"]  # no positives: recall and F1 undefined, not 0
    assert w["acc"] == pytest.approx(200 / 3) and w["prec"] == 0.0 and w["rec"] is None and w["f1"] is None
    assert w["fpr"] == pytest.approx(100 / 3)
    u = m["per_platform"]["ubuntu"]  # unparsed and errors are counted, and classified as predicted failures
    assert (u["scored"], u["unparsed"], u["errors"]) == (1, 1, 1)
    assert u["acc"] == pytest.approx(200 / 3) and u["rec"] == pytest.approx(50.0) and u["fpr"] == 0.0
    assert (u["scored_only"]["acc"], u["scored_only"]["fpr"]) == (100.0, None)
    assert u["acc_strict"] == pytest.approx(100 / 3)


def test_headline_never_rewards_an_unanswered_positive():
    # a verifier that answers only on failures: scored-only it looks perfect, the headline does not
    vs = [hand_verdict("p1", 1, status="unparsed"), hand_verdict("p2", 1, status="error"), hand_verdict("n1", 0, 0),
          hand_verdict("n2", 0, 0)]
    o = metrics.classification(vs)
    assert o["scored_only"]["acc"] == 100.0 and o["acc"] == 50.0 and o["rec"] == 0.0 and o["prec"] is None
    assert o["confusion"] == {"tp": 0, "fp": 0, "tn": 2, "fn": 2}


def test_efficiency_falls_back_to_verifier_tokens():
    e = metrics.efficiency(METRIC_SET, {"calls_per_traj": 1.25, "tokens_per_traj": 9e9, "s_per_traj": 0.5})
    # no cost fields in these verdicts: each verdict's own call; the summary's counts are not used; the
    # error line (u3) is counted apart, not in the per-trajectory figures
    assert e["tokens_per_traj"] == 110 and e["calls"] == 9 and e["calls_per_traj"] == 1.0
    assert (e["trajectories"], e["errors"], e["error_calls"]) == (9, 1, 1)
    assert e["minutes"] == pytest.approx(9 * 0.5 / 60) and e["s_per_traj"] == 0.5
    assert e["accounting"].startswith("verifier calls only")
    err = Verdict(id="e", status="error", error="bad record")  # never reached the model
    assert metrics.efficiency([err])["calls"] == 0


def test_efficiency_counts_every_model_call():
    vs = [hand_verdict("a", 1, 1), hand_verdict("b", 0, 0), hand_verdict("c", 0, 0), hand_verdict("d", 1,
                                                                                                  status="error")]
    costs = [(160.0, 1.5), (160.0, 1.5), (150.0, 1.25), (0.0, 0.0)]
    # router and cue calls already split by the pipeline
    vs = [replace(v, cost_tokens=tok, cost_calls=calls) for v, (tok, calls) in zip(vs, costs)]
    e = metrics.efficiency(vs[:3])
    assert e["tokens"] == 470 and e["calls"] == 4.25 and e["calls_per_traj"] == pytest.approx(4.25 / 3)
    assert e["tokens_per_traj"] == pytest.approx(470 / 3) and e["accounting"].startswith("all model calls")
    with_error = metrics.efficiency(vs)  # the error line is counted apart: the figures are the three's
    assert (with_error["calls_per_traj"], with_error["errors"]) == (pytest.approx(4.25 / 3), 1)
    assert with_error["error_calls"] == 1  # it has no cost fields: its own call
    vs[3] = replace(vs[3], status="ok")  # answered, no cost fields: its own call, and the accounting says so
    mixed = metrics.efficiency(vs)
    assert mixed["tokens"] == 470 + 110 and mixed["calls"] == 5.25 and mixed["accounting"].startswith("mixed")


def test_confusion_and_rates():
    c = metrics.counts(np.array([1, 1, 1, 0, 0, 0, 0]), np.array([1, 1, 0, 0, 0, 0, 1]))  # predictions, labels
    assert c == {"tp": 2, "fp": 1, "tn": 3, "fn": 1}
    # a prediction neither 0 nor 1 (an ok verdict without a score) is wrong and not a positive: an FN
    assert metrics.counts(np.array([-1, -1]), np.array([0, 1])) == {"tp": 0, "fp": 0, "tn": 0, "fn": 2}
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


def _verdict(label, score, status="ok", platform=None, **kw):
    return Verdict(id=f"{label}{score}{status}", label=label, score=score, status=status, platform=platform, **kw)


def test_predicted():
    assert metrics.predicted(_verdict(1, 1)) == 1 and metrics.predicted(_verdict(1, 0)) == 0
    assert metrics.predicted(_verdict(1, 1, "unparsed")) == 0
    assert metrics.predicted(_verdict(1, None)) == 0
    assert metrics.predicted(_verdict(1, 2)) == 0


def test_classification_and_evaluate_exact():
    vs = [_verdict(1, 1, platform="android"), _verdict(0, 1, platform="android"), _verdict(1, None, "unparsed",
                                                                                           platform="web"),
          _verdict(0, None, "error"), _verdict(1, 0, platform="web", hit_cap=True), _verdict(None, 1, platform="x")]
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
    assert (web["n"], web["scored"], web["unparsed"], web["confusion"]) == (2, 1, 1, {"tp": 0, "fp": 0, "tn": 0,
                                                                                      "fn": 2})
    assert out["per_platform"]["unknown"]["errors"] == 1


def test_cost_and_efficiency():
    full = Verdict(id="a", cost_tokens=300.0, cost_calls=1.5, prompt_tokens=100, completion_tokens=5, n_images=4)
    calls_only = Verdict(id="c", cost_calls=2.0, n_images=1)
    old = Verdict(id="b", prompt_tokens=90, completion_tokens=10, n_images=2)
    err = Verdict(id="e", status="error")
    unparsed0 = Verdict(id="u", status="unparsed")
    e = metrics.efficiency([full, old, err, unparsed0], {"s_per_traj": 3.0})
    # over the three the verifier answered; the error line counted apart
    assert e == pytest.approx({"trajectories": 3, "tokens": 400.0, "calls": 3.5, "tokens_per_traj": 400 / 3,
                               "calls_per_traj": 3.5 / 3, "images_per_traj": 2.0, "s_per_traj": 3.0,
                               "minutes": 0.15, "errors": 1, "error_calls": 0.0,
                               "accounting": "mixed: 1 of 3 verdicts carry all model calls, "
                                             "the rest the verifier's only"})
    assert "s_per_traj" not in metrics.efficiency([full], {"s_per_traj": None})
    assert "minutes" not in metrics.efficiency([full], None)
    empty = metrics.efficiency([])
    assert empty["tokens_per_traj"] == 0 and empty["calls_per_traj"] == 0 and empty["images_per_traj"] == 0
    assert metrics.efficiency([full, calls_only])["accounting"] == \
        "all model calls (router, cues, verifier), amortised per trajectory"
    assert metrics.efficiency([old])["accounting"] == "verifier calls only (the verdicts carry no cost fields)"
    assert empty["accounting"] == "verifier calls only (the verdicts carry no cost fields)"


def test_efficiency_of_one_verdict():
    v = Verdict(status="ok", score=1, cost_tokens=300.0, cost_calls=3.0, n_images=4)
    e = metrics.efficiency([v])
    assert (e["tokens_per_traj"], e["calls_per_traj"], e["images_per_traj"]) == (300.0, 3.0, 4.0)


def test_f1_when_precision_and_recall_sum_to_at_most_one_percent():
    r = metrics.rates({"tp": 1, "fp": 199, "tn": 0, "fn": 199})
    assert (r["prec"], r["rec"], r["f1"]) == (0.5, 0.5, 0.5)


def test_unanswered_counted_as_failures_by_label():
    vs = [Verdict(status="unparsed", label=1), Verdict(status="error", label=0), Verdict(status="error", label=0),
          Verdict(status="ok", score=1, label=1)]
    assert metrics.classification(vs)["unanswered_as_fail"] == {"fn": 1, "tn": 2}
