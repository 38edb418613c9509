"""evaluation/vote_rules.py: each rule's precision, recall, NPV and TNR from one set of votes, by hand, and
the same verdicts as votes.py gives for each line."""
from __future__ import annotations

import pytest

from adaptrubric_local.evaluation.vote_rules import RuleFigures, default_rules, rule_figures
from adaptrubric_local.types import Verdict
from adaptrubric_local.votes import VoteRule, counts, vote

VOTES = [[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, None], [0, None, None], [1, 0, None]]
LABELS = [1, 1, 0, 0, 0, 1, 1]
ONES, ZEROS, K = zip(*map(counts, VOTES))
# predictions by hand (undecided -> 0):   majority 1 1 0 0 1 0 u   all 1 0 0 0 u 0 0
#                                         any      1 1 1 0 1 u 1   at-least-2 1 1 0 0 1 u u
BY_HAND = {
    "majority": dict(undecided=1, tp=2, fp=1, tn=2, fn=2, precision=200 / 3, recall=50.0, npv=50.0, tnr=200 / 3),
    "all": dict(undecided=1, tp=1, fp=0, tn=3, fn=3, precision=100.0, recall=25.0, npv=50.0, tnr=100.0),
    "any": dict(undecided=1, tp=3, fp=2, tn=1, fn=1, precision=60.0, recall=75.0, npv=50.0, tnr=100 / 3),
    "at-least-2": dict(undecided=2, tp=2, fp=1, tn=2, fn=2, precision=200 / 3, recall=50.0, npv=50.0, tnr=200 / 3),
}


def test_each_rules_figures_by_hand():
    got = {f.rule: f.to_dict() for f in rule_figures(ONES, ZEROS, K, LABELS)}
    assert list(got) == ["majority", "all", "any", "at-least-2"] == default_rules(3)
    for rule, want in BY_HAND.items():
        assert got[rule] == {"rule": rule, "n": 7, **{k: pytest.approx(v) for k, v in want.items()}}


def test_the_figures_count_the_verdicts_votes_py_writes():
    """A rule's figures are those of the verdict lines scored with it: the same function decides both."""
    def line(vs):
        return [Verdict(status="ok", score=x, evidence_sufficient=True, missing_evidence="none") if x is not None
                else Verdict(status="unparsed") for x in vs]

    for rule in BY_HAND:
        preds = [vote(line(vs), "", VoteRule(rule)).score or 0 for vs in VOTES]
        tp = sum(p == 1 and y == 1 for p, y in zip(preds, LABELS))
        fp = sum(p == 1 and y == 0 for p, y in zip(preds, LABELS))
        assert (tp, fp) == (BY_HAND[rule]["tp"], BY_HAND[rule]["fp"])


def test_counts_decide_as_the_vote_lists_do():
    for vs in [*VOTES, [None, None], [1, 0], [1, None, 0, None]]:
        for rule in ("majority", "all", "any", "at-least-2"):
            assert VoteRule(rule).decide(vs) == VoteRule(rule).decide_counts(*counts(vs))


def test_a_trajectory_without_votes_is_an_undecided_predicted_failure():
    """An error or missing verdict (k = 0) counts as SCORE 0 under every rule; the rules are those of the
    fewest votes a trajectory has."""
    figs = rule_figures([2, 0, 0], [0, 2, 0], [2, 2, 0], [1, 0, 1])
    assert [f.rule for f in figs] == ["majority", "all", "any"]
    for f in figs:
        assert (f.tp, f.fp, f.tn, f.fn, f.undecided) == (1, 0, 1, 1, 1)


def test_undefined_ratios_are_none():
    (f,) = rule_figures([0, 0], [2, 2], [2, 2], [0, 0], ["all"])
    assert f == RuleFigures(rule="all", n=2, undecided=0, tp=0, fp=0, tn=2, fn=0)
    assert (f.precision, f.recall, f.npv, f.tnr) == (None, None, 100.0, 100.0)
    assert [g.to_dict()["n"] for g in rule_figures([], [], [], [])] == [0, 0, 0]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="2, 2 and 2 vote counts for 1 labels"):
        rule_figures([1, 0], [0, 1], [1, 1], [1])
    with pytest.raises(ValueError, match="labels must be 0 or 1: trajectory 1 has None"):
        rule_figures([1, 0], [0, 1], [1, 1], [1, None])
    with pytest.raises(ValueError, match="trajectory 0 has 2 and 1 votes saying 1 and 0 of 2"):
        rule_figures([2], [1], [2], [1])
    with pytest.raises(ValueError, match="at-least-3 needs at least 3 votes, got --votes 2"):
        rule_figures([2], [0], [2], [1], ["at-least-3"])
