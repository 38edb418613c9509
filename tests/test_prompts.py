"""The prompt set (prompts/): the paper's texts bundled, a strict schema, and rendering that fails loudly
on an unfilled placeholder."""
import pytest
import yaml

from adaptrubric_local.prompts import TemplateError, load_prompts, render
from adaptrubric_local.schema import SchemaError
from adaptrubric_local.types import FAMILIES


def test_render_fails_on_unfilled_placeholder():
    with pytest.raises(TemplateError) as exc:
        render("TASK: {instruction} / {answer}", "t", instruction="x")
    assert "{answer}" in str(exc.value)
    assert render("TASK: {instruction}", "t", instruction="x") == "TASK: x"


def test_prompts_are_the_papers():
    ps = load_prompts()
    assert ps.router.startswith("You are routing a GUI task to one of 8 rubric families.")
    for fam in FAMILIES:
        assert f"- {fam} :" in ps.router
    assert "CATEGORY: <one of info_query" in ps.router
    assert "8. One sentence each, <= 40 words." in ps.fine_cue
    assert "do NOT override the META RULE above" in ps.cue_block
    assert ps.verifier.startswith("You are evaluating a GUI task.")


def test_prompt_file_with_unknown_key_rejected(tmp_path):
    from adaptrubric_local.prompts import DEFAULT_PROMPTS

    doc = yaml.safe_load(DEFAULT_PROMPTS.read_text())
    doc["verifer"] = "typo"
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(SchemaError) as exc:
        load_prompts(p)
    assert "verifer" in str(exc.value)
