"""votes.py: each vote rule's verdict from k sampled verdicts, computed by hand; what a voted line keeps."""
from __future__ import annotations

import pytest

from adaptrubric_local.types import Verdict
from adaptrubric_local.verdict import parse_verdict
from adaptrubric_local.votes import SAMPLE_SEPARATOR, VoteRule, vote

OK1 = "SCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"
OK0 = "SCORE: 0\nEVIDENCE_SUFFICIENT: no\nMISSING_EVIDENCE: final_state_ambiguous"


@pytest.mark.parametrize("votes,majority,all_,any_,two", [
    ([1, 1, 1], 1, 1, 1, 1),
    ([1, 1, 0], 1, 0, 1, 1),
    ([1, 0, 0], 0, 0, 1, 0),
    ([0, 0, 0], 0, 0, 0, 0),
    ([1, 1, None], 1, None, 1, 1),     # all: the unparsed vote could have been the 0
    ([0, None, None], 0, 0, None, None),
    ([1, 0, None], None, 0, 1, None),  # majority: a tie among the parsed votes
    ([None, None, None], None, None, None, None),
])
def test_each_rule_by_hand(votes, majority, all_, any_, two):
    got = [VoteRule(r).decide(votes)[0] for r in ("majority", "all", "any", "at-least-2")]
    assert got == [majority, all_, any_, two]
    assert VoteRule("all").decide(votes)[0] == VoteRule("at-least-3").decide(votes)[0]
    assert VoteRule("any").decide(votes)[0] == VoteRule("at-least-1").decide(votes)[0]


def test_why_a_vote_is_undecided():
    assert VoteRule().decide([1, 0]) == (None, "tied vote (1 vs 1)")
    assert VoteRule("all").decide([None, None]) == (None, "no sample was parseable")
    assert VoteRule("all").decide([1, 1, None]) == (None, "all: 2 of 3 votes say 1 and 1 did not parse")


@pytest.mark.parametrize("name,msg", [
    ("most", "vote rule must be one of majority, all, any or at-least-M (M >= 1), got 'most'"),
    ("at-least-0", "got 'at-least-0'"),
])
def test_bad_rules(name, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        VoteRule(name)


def test_a_threshold_over_k_is_refused():
    with pytest.raises(ValueError, match="vote rule at-least-4 needs at least 4 votes, got --votes 3"):
        VoteRule("at-least-4").decide([1, 1, 1])


def test_a_voted_line_keeps_the_votes_the_rule_the_share_and_the_models_probability():
    samples = [parse_verdict(OK1), parse_verdict("junk"), parse_verdict(OK0), parse_verdict(OK1)]
    probs = [0.8, None, 0.3, 0.7]  # each sample's P(SCORE=1) at its SCORE digit
    v = vote(samples, "raw", VoteRule("majority"), probs)
    assert (v.status, v.score, v.votes, v.vote_rule) == ("ok", 1, [1, None, 0, 1], "majority")
    assert v.vote_share == pytest.approx(2 / 3) and v.p_success == pytest.approx((0.8 + 0.3 + 0.7) / 3)
    assert v.raw == SAMPLE_SEPARATOR.join([OK1, "junk", OK0, OK1]) and v.missing_evidence == "none"
    strict = vote(samples, "raw", VoteRule("all"), probs)  # a 0 among the votes: all says 0
    assert (strict.status, strict.score, strict.missing_evidence, strict.vote_rule) == \
        ("ok", 0, "final_state_ambiguous", "all")
    assert strict.vote_share == pytest.approx(2 / 3) and strict.p_success == v.p_success
    open_ = vote([parse_verdict(OK1), parse_verdict("junk")], "raw", VoteRule("all"), [0.9, None])
    assert (open_.status, open_.score, open_.p_success, open_.vote_share, open_.votes) == \
        ("unparsed", None, None, 1.0, [1, None])
    assert open_.parse_error == "all: 1 of 2 votes say 1 and 1 did not parse"


def test_default_rule_is_majority_and_without_probabilities_p_success_is_none():
    v = vote([parse_verdict(OK0), parse_verdict(OK1), parse_verdict(OK0)], "raw")
    assert (v.score, v.vote_rule, v.p_success, v.vote_share) == (0, "majority", None, pytest.approx(1 / 3))
    tie = vote([parse_verdict(OK0), parse_verdict(OK1)], "raw")
    assert (tie.status, tie.parse_error, tie.vote_share) == ("unparsed", "tied vote (1 vs 1)", 0.5)
    none = vote([parse_verdict("a"), parse_verdict("b")], "raw")
    assert (none.status, none.parse_error, none.vote_share, none.votes) == \
        ("unparsed", "no sample was parseable", None, [None, None])
    assert vote([], "the raw text").raw == "the raw text"


def test_a_sample_without_text_joins_as_empty():
    ok = Verdict(status="ok", score=1, evidence_sufficient=True, missing_evidence="none", raw="first")
    assert vote([ok, Verdict(status="error", error="engine failed")], "raw").raw == "first" + SAMPLE_SEPARATOR


class _Sampler:
    """A scripted engine that votes: k sample texts per verifier request, each with P(SCORE=1) at its digit."""

    name = "sampler"

    def __init__(self, texts, probs):
        from dataclasses import make_dataclass

        self.config = make_dataclass("Cfg", [("votes", int)])(len(texts))
        self.texts, self.probs = texts, probs

    def generate(self, requests):
        from adaptrubric_local.engine.base import Output, TokenProbs

        def sample(text, p):
            at = text.find("SCORE: ") + len("SCORE: ")
            return text, ([TokenProbs(offset=at, probs={"1": p, "0": 1 - p})] if "SCORE: " in text else [])

        return [Output(text=self.texts[0], samples=[sample(t, p) for t, p in zip(self.texts, self.probs)])
                for _ in requests]

    def generate_iter(self, requests):
        yield list(enumerate(self.generate(requests)))

    def close(self):
        pass


def test_the_pipeline_votes_under_its_rule(tmp_path):
    from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
    from adaptrubric_local.types import Step, Trajectory

    from conftest import make_png

    t = Trajectory(id="a", instruction="Turn on Wi-Fi.", label=1,
                   steps=[Step(screenshot=make_png(tmp_path / f"{i}.png", i), action="tap(x)") for i in range(2)])
    eng = _Sampler([OK1, OK1, "junk"], [0.9, 0.6, 0.5])
    cfg = dict(router="rules", fine=False)
    (maj,) = AdaptRubric(eng, PipelineConfig(**cfg)).score([t])
    (strict,) = AdaptRubric(eng, PipelineConfig(**cfg, vote_rule="all")).score([t])
    (two,) = AdaptRubric(eng, PipelineConfig(**cfg, vote_rule="at-least-2")).score([t])
    assert (maj.status, maj.score, maj.votes, maj.vote_rule, maj.vote_share) == ("ok", 1, [1, 1, None], "majority", 1.0)
    assert maj.p_success == pytest.approx(0.75)  # the model's: the mean of 0.9 and 0.6, not the vote share
    assert (strict.status, strict.score, strict.votes, strict.vote_rule) == ("unparsed", None, [1, 1, None], "all")
    assert (two.status, two.score, two.vote_rule) == ("ok", 1, "at-least-2")


def test_a_rule_without_votes_or_beyond_them_is_refused():
    from adaptrubric_local import FakeEngine
    from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig

    with pytest.raises(ValueError, match=r"vote_rule 'all' needs votes > 1 \(--votes k\), got 1"):
        AdaptRubric(FakeEngine(), PipelineConfig(router="rules", vote_rule="all"))
    with pytest.raises(ValueError, match="vote rule at-least-4 needs at least 4 votes, got --votes 3"):
        AdaptRubric(_Sampler([OK1] * 3, [0.9] * 3), PipelineConfig(router="rules", vote_rule="at-least-4"))
    with pytest.raises(ValueError, match="vote rule must be one of"):
        PipelineConfig(vote_rule="unanimous")
