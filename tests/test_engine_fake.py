"""The scripted engine (engine/fake.py): its default answers by request kind without reading the prompt,
the script and failure hooks, shaping like a real engine (stop line, token cap), P(SCORE=1) through
`watch`, and the accounting. The script that answers the pipeline's own prompts is dry_run's."""
from adaptrubric_local.engine.base import Request
from adaptrubric_local.engine.fake import TOKENS_PER_IMAGE, ScriptedEngine, default_script


def test_engine_fake_default_reads_no_prompt():
    router = Request(prompt="TASK INSTRUCTION:\nDelete the note called Groceries.\n\nCATEGORIES ...", kind="route")
    out = ScriptedEngine().generate([router])
    assert out[0].text == "CATEGORY: general"
    assert default_script(Request(prompt="anything", kind="cue")).startswith("NO_HINT:")
    assert "SCORE: 1" in default_script(Request(prompt="anything", kind="verify"))


def test_script_failures_and_batches_are_recorded():
    eng = ScriptedEngine(script=lambda r: f"echo {r.tag}", fail=lambda r: "boom" if r.tag == "b" else None, name="f")
    a, b = eng.generate([Request(prompt="p", tag="a"), Request(prompt="p", tag="b", images=["x.png"])])
    assert (a.text, a.error, b.text, b.error, b.n_images) == ("echo a", None, "", "boom", 1)
    assert [[r.tag for r in batch] for batch in eng.batches] == [["a", "b"]] and eng.name == "f"


def test_token_accounting_counts_words_and_images():
    out = ScriptedEngine(script=lambda r: "one two three").generate(
        [Request(prompt="four words of prompt", suffix="plus two", images=["a.png", "b.png"])])[0]
    assert (out.prompt_tokens, out.completion_tokens) == (6 + 2 * TOKENS_PER_IMAGE, 3)
    assert out.visual_tokens == 2 * TOKENS_PER_IMAGE and out.n_images == 2


def test_watched_score_digits_get_their_probability():
    eng = ScriptedEngine(script=lambda r: "SCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none",
                     p_score=lambda req, digit: 0.75)
    watched, unwatched = eng.generate([Request(prompt="p", watch=("0", "1")), Request(prompt="p")])
    assert [(p.offset, p.probs) for p in watched.token_probs] == [(7, {"1": 0.75, "0": 0.25})]
    assert unwatched.token_probs == []
    assert eng.next_token_probs([Request(prompt="p")], [""], ("0", "1", "x")) == [{"0": 0.25, "1": 0.75, "x": 0.0}]
