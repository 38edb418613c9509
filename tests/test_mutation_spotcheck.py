"""Tests for mutants that an earlier mutation run had recorded as killed but that survived when a
random sample of those results was run again on the final code (docs/mutation.md, spot check)."""
from dataclasses import dataclass

from adaptrubric_local import FakeEngine
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.scoring import vars_of
from adaptrubric_local.types import CueResult
from adaptrubric_local.verdict import parse_verdict

LONG = " ".join(["Check"] + ["the"] * 45 + ["date."])  # 47 words: over the 40-word limit


def test_values_with_a_trailing_period_and_blank_output():
    v = parse_verdict("SCORE: 1\nEVIDENCE_SUFFICIENT: yes.\nMISSING_EVIDENCE: none.")
    assert (v.status, v.score, v.evidence_sufficient) == ("ok", 1, True)
    blank = parse_verdict("  \n ")
    assert (blank.status, blank.parse_error) == ("unparsed", "empty output")


def test_the_config_record_names_the_adapter_and_visual_token_cap():
    @dataclass
    class Cfg:
        adapter: str = "runs/adapter"
        max_visual_tokens: int = 256

    class Eng(FakeEngine):
        config = Cfg()

    meta = vars_of(AdaptRubric(Eng(), PipelineConfig(router="rules")))
    assert (meta["adapter"], meta["max_visual_tokens"]) == ("runs/adapter", 256)
    assert meta["engine"] == {"adapter": "runs/adapter", "max_visual_tokens": 256}


def test_cue_calls_failures_and_the_length_filter():
    key = ("Create an event for 5 May at 10:00.", "create_modify")
    failing = AdaptRubric(FakeEngine(fail=lambda r: "boom" if r.kind == "cue" else None), PipelineConfig(router="rules"))
    assert failing.cues_many([key])[key] == CueResult(abstained=True, reason="cue call failed: boom", parsed=False)
    script = lambda r: f"CUE_1: {LONG}\nCUE_2: Check the date." if r.kind == "cue" else ""
    filtered = AdaptRubric(FakeEngine(script=script), PipelineConfig(router="rules", cue_filter=True))
    assert filtered.cues_many([key])[key].cues == ["Check the date."]
    unfiltered = AdaptRubric(FakeEngine(script=script), PipelineConfig(router="rules"))
    assert unfiltered.cues_many([key])[key].cues == [LONG, "Check the date."]
