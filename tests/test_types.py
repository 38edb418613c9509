"""The values that flow through the pipeline (types.py): the paper's families, a trajectory's canonical
record and screenshots, and verdict lines read back by newer and older versions."""
from adaptrubric_local.types import FAMILIES, MISSING_EVIDENCE_VALUES, Step, Trajectory, Verdict


def test_the_papers_eight_families_and_missing_evidence_values():
    assert len(FAMILIES) == 8 and FAMILIES[-1] == "general" and "composite_workflow" in FAMILIES
    assert MISSING_EVIDENCE_VALUES[-1] == "none" and "sink_missing" in MISSING_EVIDENCE_VALUES


def test_trajectory_record_leaves_out_empty_fields_and_the_source():
    t = Trajectory(id="t", instruction="Do it.", steps=[Step(screenshot="a.png", action="tap"),
                                                        Step(screenshot=None, action="type", text="hi")],
                   label=1, source="/data/x.jsonl")
    assert t.to_dict() == {"id": "t", "instruction": "Do it.", "label": 1,
                           "steps": [{"screenshot": "a.png", "action": "tap"}, {"action": "type", "text": "hi"}]}
    assert t.screenshots == ["a.png"]
    assert t == Trajectory(id="t", instruction="Do it.", steps=t.steps, label=1)  # the source is not compared


def test_verdict_lines_round_trip_and_unknown_keys_are_ignored():
    v = Verdict(id="a", score=1, status="ok", cues=["c"], cost_calls=1.5)
    d = v.to_dict()
    assert d["error"] is None and d["cues"] == ["c"]  # every field, so lines share one shape
    assert Verdict.from_dict(d) == v
    assert Verdict.from_dict({**d, "field_of_a_newer_version": 3}) == v
    assert Verdict.from_dict({"id": "old", "score": 0}) == Verdict(id="old", score=0)  # an older line
