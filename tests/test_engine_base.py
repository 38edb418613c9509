"""The engine interface (engine/base.py): what every engine promises (batched `generate`, optional
next-token probabilities, `close`) and `cut_after_line`, the stop rule a row ends by."""
import pytest

from adaptrubric_local.engine.base import Engine, Output, Request, cut_after_line


@pytest.mark.parametrize("text,prefix,expected", [
    ("a\nSCORE: 1\nmore", "SCORE:", "a\nSCORE: 1\n"),  # the newline that ends the line is kept
    ("a\nSCORE: 1", "SCORE:", "a\nSCORE: 1"),  # ended by the end of the text
    ("x SCORE: 1\n", "SCORE:", None),  # only at a line start
    ("SCORE: 0\nSCORE: 1\n", "SCORE:", "SCORE: 0\n"),  # the first such line
    ("", "SCORE:", None),
    ("\n\nM: x", "M:", "\n\nM: x"),
])
def test_cut_after_line(text, prefix, expected):
    assert cut_after_line(text, prefix) == expected


def test_an_engine_needs_only_generate():
    class Echo(Engine):
        def generate(self, requests):
            return [Output(text=r.prompt) for r in requests]

    eng = Echo()
    assert [o.text for o in eng.generate([Request(prompt="a"), Request(prompt="b")])] == ["a", "b"]
    eng.close()  # a no-op unless a backend holds resources
    with pytest.raises(NotImplementedError, match="Echo does not expose next-token probabilities"):
        eng.next_token_probs([Request(prompt="a")], [""])
    with pytest.raises(TypeError):
        Engine()  # abstract


def test_request_and_output_defaults():
    r = Request(prompt="p")
    assert (r.images, r.suffix, r.max_new_tokens, r.watch, r.kind, r.tag, r.stop_after_line) == (
        [], "", None, (), "verify", None, None)
    o = Output()
    assert (o.text, o.error, o.hit_cap, o.token_probs) == ("", None, False, [])
