"""The criteria stage (criteria.py): router and cue calls per distinct instruction, what a failed or
unreadable router reply falls back to, the router's token cap, and cues without an engine."""
from pathlib import Path

from adaptrubric_local import FakeEngine
from adaptrubric_local.bank import DEFAULT_BANK
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.stages.cues import manual_cues
from adaptrubric_local.types import CueResult, RouteResult

LONG_47 = " ".join(["Check"] + ["the"] * 45 + ["date."])  # 47 words: over the 40-word limit


def test_cue_calls_failures_and_the_length_filter():
    key = ("Create an event for 5 May at 10:00.", "create_modify")
    failing = AdaptRubric(FakeEngine(fail=lambda r: "boom" if r.kind == "cue" else None),
                          PipelineConfig(router="rules"))
    assert failing.cues_many([key])[key] == CueResult(abstained=True, reason="cue call failed: boom", parsed=False)

    def script(r):
        return f"CUE_1: {LONG_47}\nCUE_2: Check the date." if r.kind == "cue" else ""

    filtered = AdaptRubric(FakeEngine(script=script), PipelineConfig(router="rules", cue_filter=True))
    assert filtered.cues_many([key])[key].cues == ["Check the date."]
    unfiltered = AdaptRubric(FakeEngine(script=script), PipelineConfig(router="rules"))
    assert unfiltered.cues_many([key])[key].cues == [LONG_47, "Check the date."]


def test_a_failed_router_call_routes_to_the_fallback_and_says_why():
    pipe = AdaptRubric(FakeEngine(fail=lambda r: "CUDA out of memory" if r.kind == "route" else None),
                       PipelineConfig())
    res = pipe.route_many(["Turn on Wi-Fi."])["Turn on Wi-Fi."]
    assert res == RouteResult(category=pipe.bank.fallback, mode="model", raw="CUDA out of memory", parsed=False)
    assert pipe.criteria.unparsed["route"] == 1


def test_router_requests_carry_the_route_cap_and_unreadable_replies_fall_back():
    eng = FakeEngine(script=lambda r: "I am not sure." if r.kind == "route" else "")
    pipe = AdaptRubric(eng, PipelineConfig(route_max_new_tokens=7))
    res = pipe.route_many(["Turn on Wi-Fi."])["Turn on Wi-Fi."]
    assert res == RouteResult(category=pipe.bank.fallback, mode="model", raw="I am not sure.", parsed=False)
    assert [r.max_new_tokens for b in eng.batches for r in b] == [7]


def test_without_an_engine_cues_come_from_the_manual_list():
    pipe = AdaptRubric(None, PipelineConfig(router="rules", manual_cues=None))
    key = ("Type 'Hello' in Notes.", "create_modify")
    assert pipe.cues_many([key]) == {key: manual_cues([], key[0], filter_words=False, limit_length=False)}


def test_an_unreadable_router_reply_goes_to_the_banks_own_fallback(tmp_path):
    text = Path(DEFAULT_BANK).read_text(encoding="utf-8")
    bank = tmp_path / "bank.yaml"
    text = text.replace("  general:\n", "  everything_else:\n").replace("version: 1\n",
                                                                        "version: 1\ntaxonomy: custom\n")
    bank.write_text(text, encoding="utf-8")
    pipe = AdaptRubric(FakeEngine(script=lambda r: "hmm"), PipelineConfig(bank_path=str(bank)))
    assert pipe.bank.fallback == "everything_else"
    res = pipe.route_many(["Turn on Wi-Fi."])["Turn on Wi-Fi."]
    assert (res.category, res.parsed) == ("everything_else", False)
