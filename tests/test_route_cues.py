"""Router (rules and model modes) and the fine-cue parser."""
import json
from pathlib import Path

import pytest

from adaptrubric_local.cli import main
from adaptrubric_local.cues import parse_cues
from adaptrubric_local.route import parse_router_output, route_rules

from conftest import SHARED

HERE = Path(__file__).parent


def _accuracy(path):
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return sum(route_rules(r["instruction"]).category == r["label"] for r in rows) / len(rows)


def test_rules_router_on_dev_set():
    path = SHARED / "router_dev.jsonl"
    if not path.is_file():
        pytest.skip("../shared/data/router_dev.jsonl not present")
    assert _accuracy(path) >= 0.97  # at most 2 of 85


def test_rules_router_on_project_heldout_set():
    assert _accuracy(HERE / "data" / "router_heldout.jsonl") >= 0.97  # at most 1 of 41


@pytest.mark.parametrize("instruction,family", [
    ("Reply to Bob's latest message with 'ok'", "communication"),
    ("Please help me remove the shortcut ctrl+f in VS Code.", "state_navigation"),
    ("Remove the extra whitespaces in column B.", "create_modify"),
    ("Turn on Wifi, then open the dialer app", "composite_workflow"),
    ("Copy the file a.txt to Documents and then rename it to b.txt.", "transfer"),
    ("How many contacts do I have?", "info_query"),
    ("When I reply to an email, it quotes the original. Could you help me remove the indentation?",
     "state_navigation"),
])
def test_rules_router_cases(instruction, family):
    assert route_rules(instruction).category == family


@pytest.mark.parametrize("text,cat,parsed", [
    ("CATEGORY: transfer", "transfer", True),
    ("**CATEGORY:** delete_cleanup", "delete_cleanup", True),
    ("Thinking...\nCATEGORY: info_query\n", "info_query", True),
    ("CATEGORY: shopping", "general", False),
    ("I think this is a transfer task.", "general", False),
    ("", "general", False),
])
def test_model_router_parse(text, cat, parsed):
    r = parse_router_output(text)
    assert (r.category, r.parsed, r.mode) == (cat, parsed, "model")


def test_route_cli_file(tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": 1, "instruction": "Delete the note Foo."}\n{"id": 2}\n'
                   '{"id": 3, "instruction": "Turn on Bluetooth."}\n')
    out = tmp_path / "out.jsonl"
    rc = main(["route", "--router", "rules", "--input", str(inp), "--output", str(out)])
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["id"], r["category"]) for r in rows] == [(1, "delete_cleanup"), (3, "state_navigation")]
    assert rc == 1 and "record line 2, field 'instruction'" in capsys.readouterr().err
    assert main(["route", "--router", "rules", "Delete the note Foo."]) == 0
    assert main(["route", "Delete the note Foo."]) == 2  # the default model router needs --model
    assert capsys.readouterr().out.strip() == "delete_cleanup"


INS = "Add 'Hello, World!' to the top of note_SiFbv.txt in Markor."


def test_cues_no_hint():
    r = parse_cues("NO_HINT: the coarse rubric covers it.", INS)
    assert r.abstained and r.cues == [] and r.parsed and r.reason.startswith("the coarse")


def test_cues_two_kept_and_third_dropped():
    text = ("CUE_1: Pay attention to whether Hello, World! appears before any other text in the note.\n"
            "CUE_2: Check if the edit was made in note_SiFbv.txt rather than another note.\n"
            "CUE_3: Check if the app is Markor.")
    r = parse_cues(text, INS)
    assert len(r.cues) == 2 and r.dropped == [{"cue": "Check if the app is Markor.", "reason": "more than 2 cues"}]


def test_cues_rule4_and_length():
    long = "Check if " + " ".join(["word"] * 45) + "."
    text = f"CUE_1: Check if the text is visibly at the top.\nCUE_2: {long}"
    r = parse_cues(text, INS, filter_words=True, limit_length=True)
    assert r.cues == [] and r.abstained
    reasons = [d["reason"] for d in r.dropped]
    assert "visibly" in reasons[0] and "over 40 words" in reasons[1]


def test_cues_rule4_allows_words_the_instruction_uses():
    r = parse_cues("CUE_1: Pay attention to whether all expenses were deleted.", "Delete all expenses.",
                   filter_words=True)
    assert r.cues and not r.dropped
    r = parse_cues("CUE_1: Pay attention to whether all expenses were deleted.", "Delete the expense.",
                   filter_words=True)
    assert not r.cues and "'all'" in r.dropped[0]["reason"]
    r = parse_cues("CUE_1: Check if the file was saved under the new name.", "Rename the file to a.txt.",
                   filter_words=True)
    assert not r.cues and "saved/persisted" in r.dropped[0]["reason"]


def test_cues_unparseable_abstains_and_is_recorded():
    r = parse_cues("Sure! Here are some cues: look at the note.", INS)
    assert r.abstained and not r.parsed and r.reason == "unparseable cue output"
