"""The fine-cue parser's defaults: only the paper's two cue slots limit what is kept."""
from adaptrubric_local.cues import manual_cues, parse_cues

INS = "Add 'Hello, World!' to the top of note_SiFbv.txt in Markor."
LONG = "Check if " + " ".join(["word"] * 45) + "."


def test_no_word_or_length_filter_by_default():
    text = ("CUE_1: Pay attention to whether the exact date/time matches every occurrence in all fields.\n"
            f"CUE_2: {LONG}")
    r = parse_cues(text, "Create an event for 5 May at 10:00.")
    assert len(r.cues) == 2 and not r.dropped and not r.abstained
    assert r.cues[1] == LONG


def test_filters_are_options():
    text = "CUE_1: Pay attention to whether the exact date/time is set.\nCUE_2: " + LONG
    words_only = parse_cues(text, "Create an event for 5 May at 10:00.", filter_words=True)
    assert words_only.cues == [LONG] and "'exactly'" in words_only.dropped[0]["reason"]
    length_only = parse_cues(text, "Create an event for 5 May at 10:00.", limit_length=True)
    assert length_only.cues == ["Pay attention to whether the exact date/time is set."]
    assert "over 40 words (47)" == length_only.dropped[0]["reason"]


def test_only_two_cue_slots_kept_in_numeric_order():
    text = "CUE_10: ten.\nCUE_2: Check two.\nCUE_1: Check one.\nCUE_3: Check three."
    r = parse_cues(text, INS)
    assert r.cues == ["Check one.", "Check two."]
    assert [d["cue"] for d in r.dropped] == ["Check three.", "ten."]
    assert {d["reason"] for d in r.dropped} == {"more than 2 cues"}


def test_manual_cues_same_defaults_and_options():
    cue = "Check if every line was visibly saved."
    assert manual_cues([cue], INS).cues == [cue]
    r = manual_cues([cue], INS, filter_words=True)
    assert not r.cues and r.abstained and r.reason == "every cue was dropped"
    assert manual_cues([], INS).reason == "no cues given"
