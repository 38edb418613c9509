"""The rules router's lexicon (route/lexicon.py, data/router_lexicon.yaml): an immutable value, strict
loading with errors that name file and field, and routing with two lexicons at once."""
import pytest

from adaptrubric_local.route import (
    DEFAULT_LEXICON,
    load_lexicon,
    route_rules,
)
from adaptrubric_local.schema import SchemaError


def test_lexicon_without_is_a_new_value():
    full = load_lexicon()
    smaller = full.without(["uninstall"])
    assert "uninstall" not in smaller.verbs and "uninstall" in full.verbs
    assert "uninstall" not in smaller.verb_keys and smaller.verbs["delete"] == "delete_cleanup"
    assert route_rules("Uninstall the Candy Crush app.", smaller).category != "delete_cleanup"
    assert route_rules("Uninstall the Candy Crush app.").category == "delete_cleanup"
    with pytest.raises(TypeError):
        full.verbs["uninstall"] = "general"  # read-only
    with pytest.raises(AttributeError):
        full.verbs = {}  # frozen


def test_two_lexicons_route_at_once_in_threads():
    """No shared state: threads routing with different lexicons do not see each other's."""
    from concurrent.futures import ThreadPoolExecutor
    text = "Uninstall the Candy Crush app."
    full, smaller = load_lexicon(), load_lexicon().without(["uninstall"])
    alone = {"full": route_rules(text, full).category, "smaller": route_rules(text, smaller).category}
    assert alone["full"] != alone["smaller"]
    with ThreadPoolExecutor(8) as pool:
        cats = list(pool.map(lambda lex: route_rules(text, lex).category, [full, smaller] * 200))
    assert cats == [alone["full"], alone["smaller"]] * 200


@pytest.mark.parametrize("edit,field", [
    (lambda t: t.replace("version: 1", "version: 1\nverb_synonyms: {}"), "verb_synonyms"),
    (lambda t: t.replace("  communication:", "  messaging:", 1), "verbs"),
    (lambda t: t.replace("[reply, respond,", "[reply, delete, respond,", 1), "verbs"),
    (lambda t: t.replace("chart: [chart,", "chart: ['chart(', ", 1), "words.chart"),
    (lambda t: t.replace("stop_words: [the,", "stop_words: [2,", 1), "stop_words.0"),
])
def test_lexicon_file_errors_name_file_and_field(tmp_path, edit, field):
    bad = tmp_path / "lexicon.yaml"
    bad.write_text(edit(DEFAULT_LEXICON.read_text()))
    with pytest.raises(SchemaError) as err:
        load_lexicon(bad)
    assert str(bad) in str(err.value) and f"field '{field}'" in str(err.value)


def test_bundled_lexicon_covers_every_family():
    from adaptrubric_local.types import FAMILIES
    lex = load_lexicon()
    assert set(lex.verbs.values()) == set(FAMILIES) - {"composite_workflow"}
    assert lex.verb_keys.index("turn on") < lex.verb_keys.index("turn")  # phrases before their first word
