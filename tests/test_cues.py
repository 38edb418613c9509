"""The fine-cue parser and filters (cues.py): NO_HINT, the paper's two cue slots, the optional word and
length filters, and unparseable replies recorded as abstentions."""


from adaptrubric_local.stages.cues import manual_cues, parse_cues

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
    assert length_only.dropped[0]["reason"] == "over 40 words (47)"


INS = "Add 'Hello, World!' to the top of note_SiFbv.txt in Markor."


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
