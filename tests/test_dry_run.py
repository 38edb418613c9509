"""dry_run: the scripted engine that answers the pipeline's own prompts, and the tiny model's tokenizer
text."""
from adaptrubric_local import FakeEngine as PackageFakeEngine
from adaptrubric_local.bank import DEFAULT_BANK, load_bank
from adaptrubric_local.dry_run import FakeEngine, pipeline_script, tokenizer_corpus
from adaptrubric_local.engine import fake
from adaptrubric_local.engine.base import Request
from adaptrubric_local.prompts import DEFAULT_PROMPTS, load_prompts
from adaptrubric_local.route import router_prompt


def _route_request(instruction: str) -> Request:
    return Request(prompt=router_prompt(load_prompts(), load_bank(), instruction), kind="route")


def test_router_prompts_are_answered_by_the_rules_router():
    out = FakeEngine().generate([_route_request("Delete the note called Groceries."),
                                 _route_request("Turn on Bluetooth.")])
    assert [o.text for o in out] == ["CATEGORY: delete_cleanup", "CATEGORY: state_navigation"]


def test_other_kinds_fall_through_to_the_engine_fake_default():
    for kind in ("cue", "verify"):
        req = Request(prompt="anything", kind=kind)
        assert pipeline_script(req) == fake.default_script(req)
    assert "SCORE: 1" in pipeline_script(Request(prompt="p", kind="verify"))


def test_a_given_script_wins_and_the_package_exports_this_engine():
    assert FakeEngine(lambda r: "x").generate([_route_request("Turn on Bluetooth.")])[0].text == "x"
    assert PackageFakeEngine is FakeEngine and issubclass(FakeEngine, fake.ScriptedEngine)


def test_tokenizer_corpus_holds_the_prompts_bank_and_verdict_lines():
    corpus = tokenizer_corpus()
    text = "".join(corpus)
    assert DEFAULT_PROMPTS.read_text() in text and DEFAULT_BANK.read_text() in text
    assert "EVIDENCE_SUFFICIENT: yes" in text and "MISSING_EVIDENCE: none" in text
