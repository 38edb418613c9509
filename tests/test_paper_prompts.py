"""The bundled rubric bank and prompts against the paper's Appendix H, line by line.

tests/data/paper_appendix_h.txt holds verbatim runs of the paper's lines (H.1 bank and meta rule,
H.2 router prompt and verifier skeleton, H.3 fine-cue prompt and cue block); the first test checks
them against the paper itself when the paper is present (../shared/paper, or $ADAPTRUBRIC_PAPER).
Normalisation, the same on both sides of every comparison: the paper's curly apostrophe (U+2019)
becomes ASCII ', blank lines are dropped (the paper's text extraction puts one between every line,
so its paragraphing is lost), and trailing whitespace is stripped from each line. Nothing else is
normalised: every other character of every line must match. The only lines a rendered prompt may
add to the paper's are the documented ones (the section headings of prompts/default.yaml).
"""
from __future__ import annotations

import ast
import os
from functools import lru_cache
from pathlib import Path

import pytest

from adaptrubric_local.bank import load_bank
from adaptrubric_local.prompts import load_prompts, render
from adaptrubric_local.stages.cues import cue_prompt
from adaptrubric_local.stages.evidence import compile_evidence
from adaptrubric_local.stages.fusion import fuse
from adaptrubric_local.types import FAMILIES, Step, Trajectory

HERE = Path(__file__).resolve().parent
EXCERPT = HERE / "data" / "paper_appendix_h.txt"
PAPER = Path(os.environ.get("ADAPTRUBRIC_PAPER")
             or HERE.parent / ".." / "shared" / "paper" / "adaptrubric-paper.txt")

INS = "Add 'Hello, World!' to the top of note_SiFbv.txt in Markor."
CUES = ["Pay attention to whether Hello, World! appears before any other text in the note.",
        "Check if the edit was made in note_SiFbv.txt rather than another note."]
META_CLAUSE = ("task instruction itself, and they do NOT override the META RULE above.", "task instruction itself.")


def norm(text: str) -> list[str]:
    """The comparison form of a text: non-blank lines, curly apostrophes straightened, right-stripped."""
    return [line.replace("\u2019", "'").rstrip() for line in text.splitlines() if line.strip()]


@lru_cache(maxsize=1)
def sections() -> dict[str, str]:
    """The excerpt's verbatim sections by name ("H.2 router", ...)."""
    out: dict[str, list[str]] = {}
    name = None
    for line in EXCERPT.read_text(encoding="utf-8").split("\n"):
        if line.startswith("@@ "):
            name = line[3:].strip()
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return {k: "\n".join(v).rstrip("\n") for k, v in out.items()}


def paper(name: str) -> list[str]:
    """One excerpt section in comparison form."""
    return norm(sections()[name])


def _lit(node: ast.AST):
    if isinstance(node, ast.Name):  # OUTPUT_FORMAT_HOLISTIC
        return node.id
    if isinstance(node, ast.Dict):
        return {_lit(k): _lit(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_lit(e) for e in node.elts]
    return ast.literal_eval(node)


@lru_cache(maxsize=1)
def paper_bank() -> dict[str, dict]:
    """The paper's eight RubricSet(...) entries, parsed as Python syntax, by id."""
    tree = ast.parse("\n".join(paper("H.1 rubric_bank")))
    entries = {}
    for stmt in tree.body:
        assert isinstance(stmt.value, ast.Call) and stmt.value.func.id == "RubricSet"
        kw = {k.arg: _lit(k.value) for k in stmt.value.keywords}
        entries[kw["id"]] = kw
    assert len(entries) == 8
    return entries


def paper_meta_rule() -> list[str]:
    lines = paper("H.1 meta_rule")
    assert lines[0] == "Shared meta rule appended to each family:"
    assert all(x.startswith("- ") for x in lines[1:])
    return [x[2:] for x in lines[1:]]


def skeleton() -> list[str]:
    return paper("H.2 verifier")


def paper_output_format() -> list[str]:
    lines = skeleton()
    return lines[lines.index("Screenshots (in order) are shown below.") + 1:]


def paper_entry(family: str) -> dict:
    return paper_bank()[load_bank().families[family].id]


def paper_rubric_lines(family: str, meta: bool = True) -> list[str]:
    """The H.1 lines of one family as the verifier prompt renders them (headings and list marks are
    the documented additions of prompts/default.yaml)."""
    s, h = paper_entry(family)["sections"], load_prompts().headings
    lines = [h.verification_steps, *(f"{n}. {x}" for n, x in enumerate(s["verification_steps"], 1)),
             h.common_pitfalls, *(f"- {x}" for x in s["common_pitfalls"]),
             h.special_rules, *(f"- {x}" for x in s["special_rules"])]
    return lines + ([h.meta_rule, *(f"- {x}" for x in paper_meta_rule())] if meta else [])


def paper_cue_block(cues: list[str], meta: bool = True) -> list[str]:
    """The H.3 cue block with the paper's `- {cue_1}` / `- {cue_2}` lines filled (or left out)."""
    out = []
    for line in paper("H.3 cue_block"):
        if line in ("- {cue_1}", "- {cue_2}"):
            n = int(line[-2]) - 1
            out += [f"- {cues[n]}"] if n < len(cues) else []
        else:
            out.append(line if meta else line.replace(*META_CLAUSE))
    return out


def _traj() -> Trajectory:
    steps = [Step(screenshot=None, action="open_app(Markor)", action_type="open_app"),
             Step(screenshot=None, action="type('Hello, World!')", action_type="type", text="Hello, World!"),
             Step(screenshot=None, action="click(save)", action_type="click")]
    return Trajectory(id="t1", instruction=INS, steps=steps, answer="done")


def expected_verifier(family: str, cues: list[str], coarse: bool = True, fine: bool = True) -> list[str]:
    """The paper's verifier prompt for one Table 4 row, built from the H.1-H.3 lines alone."""
    ev = compile_evidence(_traj())
    values = dict(instruction=INS, agent_answer=ev.agent_answer, typed_texts=ev.typed_texts,
                  key_actions=ev.key_actions)
    lines = skeleton()
    if not (coarse or fine):  # w/o Both: instruction and screenshots only
        shots = lines.index("Screenshots (in order) are shown below.")
        lines = lines[:lines.index("COMPILED EVIDENCE:")] + lines[shots:]
    rubric = paper_rubric_lines(family) if coarse else []
    blocks = {"{verification_steps}": rubric, "{common_pitfalls}": [], "{special_rules}": [],
              "{additional_attention}": paper_cue_block(cues, meta=coarse) if fine and cues else [],
              "{action_trace}": norm(ev.action_trace)}
    out = []
    for line in lines:
        out += blocks[line] if line in blocks else [line.format(**values)]
    return out


def find_in_order(expected: list[str], rendered: list[str]) -> None:
    """Assert every expected line occurs in `rendered`, in order (naming the first that does not)."""
    pos = 0
    for line in expected:
        try:
            pos = rendered.index(line, pos) + 1
        except ValueError:
            raise AssertionError(f"line missing or out of order: {line!r}") from None


# ---------------------------------------------------------------- the excerpt is the paper's text
def test_excerpt_is_verbatim_from_the_paper():
    if not PAPER.is_file():
        pytest.skip(f"paper text not present at {PAPER} (set ADAPTRUBRIC_PAPER)")
    text = "\n" + PAPER.read_text(encoding="utf-8") + "\n"
    assert set(sections()) == {"H.1 rubric_bank", "H.1 meta_rule", "H.2 router", "H.2 verifier",
                               "H.3 fine_cue", "H.3 cue_block"}
    for name, body in sections().items():
        assert "\n" + body + "\n" in text, f"excerpt section {name!r} is not a run of whole lines of the paper"


def test_excerpt_holds_what_the_issue_found_missing():
    assert paper("H.3 cue_block")[-1] == ("- A cue CLEARLY CONTRADICTED by visible evidence is still a strong FAIL "
                                          "signal.")
    assert len(paper_bank()) == 8 and len(paper_meta_rule()) == 3


# ---------------------------------------------------------------- H.1: the rubric bank
@pytest.mark.parametrize("family", FAMILIES)
def test_bank_entry_is_the_papers(family):
    rs, entry = load_bank().families[family], paper_entry(family)
    assert (rs.id, rs.categories, rs.description) == (entry["id"], entry["categories"], entry["description"])
    s = entry["sections"]
    assert list(rs.verification_steps) == s["verification_steps"]
    assert list(rs.common_pitfalls) == s["common_pitfalls"]
    assert list(rs.special_rules) == s["special_rules"]
    assert rs.output_format == s["output_format"]
    assert [[i.id, i.name, i.criticality] for i in rs.rubric_items] == entry["rubric_items"]


def test_meta_rule_and_output_format_are_the_papers():
    bank = load_bank()
    assert list(bank.meta_rule) == paper_meta_rule()
    assert norm(bank.output_formats["OUTPUT_FORMAT_HOLISTIC"]) == paper_output_format()


@pytest.mark.parametrize("family", FAMILIES)
def test_every_h1_line_is_in_the_rendered_prompt_of_its_family(family):
    bank, prompts = load_bank(), load_prompts()
    rs = bank.families[family]
    rendered = norm(fuse(prompts, bank, rs, INS, compile_evidence(_traj()), CUES).full)
    find_in_order(paper_rubric_lines(family), rendered)
    # the fine-cue prompt receives the family's critical items (H.3)
    crit = [f"- {i}: {name}" for i, name, level in paper_entry(family)["rubric_items"] if level == "critical"]
    find_in_order(crit, norm(cue_prompt(prompts, INS, family, rs)))


# ---------------------------------------------------------------- H.2: router and verifier skeleton
def test_router_prompt_is_the_papers():
    rendered = norm(render(load_prompts().router, "router", instruction=INS))
    expected = [line.format(instruction=INS) for line in paper("H.2 router")]
    find_in_order(expected, rendered)
    assert rendered == expected  # and nothing else


def test_verifier_template_is_the_papers_skeleton():
    out_fmt = paper_output_format()
    expected = [*skeleton()[:-len(out_fmt)], "{output_format}"]
    assert norm(load_prompts().verifier) == expected


@pytest.mark.parametrize("family", FAMILIES)
def test_rendered_verifier_prompt_is_the_papers_text(family):
    """Full row: every line of H.2 (with H.1 and H.3 filled in) and nothing but the headings."""
    bank, prompts = load_bank(), load_prompts()
    rendered = norm(fuse(prompts, bank, bank.families[family], INS, compile_evidence(_traj()), CUES).full)
    expected = expected_verifier(family, CUES)
    find_in_order(expected, rendered)
    assert rendered == expected


# ---------------------------------------------------------------- H.3: fine-cue prompt and cue block
def test_fine_cue_prompt_is_the_papers():
    bank, prompts = load_bank(), load_prompts()
    rs = bank.families["create_modify"]
    rendered = norm(cue_prompt(prompts, INS, "create_modify", rs))
    items = [f"- {i.id}: {i.name}" for i in rs.critical_items]
    expected = []
    for line in paper("H.3 fine_cue"):
        expected += (items if line == "{rubric_items_block}"
                     else [line.format(instruction=INS, category="create_modify")])
    find_in_order(expected, rendered)
    assert rendered == expected


def test_cue_block_template_is_the_papers():
    expected = [x for x in paper("H.3 cue_block") if x != "- {cue_2}"]
    expected[expected.index("- {cue_1}")] = "{cue_bullets}"
    assert norm(load_prompts().cue_block) == expected


def test_verifier_prompt_with_two_cues_has_every_line_of_the_cue_block_in_order():
    bank, prompts = load_bank(), load_prompts()
    rendered = norm(fuse(prompts, bank, bank.families["create_modify"], INS, compile_evidence(_traj()), CUES).full)
    block = paper_cue_block(CUES)
    assert len(block) == len(paper("H.3 cue_block")) and block[-1].startswith("- A cue CLEARLY CONTRADICTED")
    find_in_order(block, rendered)
    # the block sits between the rubric and the screenshots, in one piece
    start = rendered.index(block[0])
    assert rendered[start:start + len(block)] == block
    shots = rendered.index("Screenshots (in order) are shown below.")
    assert rendered.index("- " + paper_meta_rule()[-1]) < start < shots


def test_one_cue_fills_one_slot():
    bank, prompts = load_bank(), load_prompts()
    rendered = norm(fuse(prompts, bank, bank.families["create_modify"], INS, compile_evidence(_traj()), CUES[:1]).full)
    assert rendered == expected_verifier("create_modify", CUES[:1])
    assert f"- {CUES[1]}" not in rendered


# ---------------------------------------------------------------- Table 4 rows (w/o Coarse, w/o Fine, w/o Both)
def test_cue_block_without_meta_rule_differs_only_by_that_clause():
    ps = load_prompts()
    assert ps.cue_block_no_meta == ps.cue_block.replace(", and they do NOT override the META RULE above.", ".")
    assert "META RULE" not in ps.cue_block_no_meta


@pytest.mark.parametrize("coarse,fine", [(True, True), (True, False), (False, True), (False, False)])
def test_each_ablation_row_is_the_papers_text_for_that_row(coarse, fine):
    bank, prompts = load_bank(), load_prompts()
    vp = fuse(prompts, bank, bank.families["transfer"], INS, compile_evidence(_traj()), CUES, coarse=coarse, fine=fine)
    rendered = norm(vp.full)
    assert rendered == expected_verifier("transfer", CUES, coarse=coarse, fine=fine)
    text = vp.full
    assert ("META RULE" in text) is coarse  # no dangling reference to a rule the prompt lacks
    assert ("ATTENTION CUES" in text) is fine
    assert ("COMPILED EVIDENCE:" in text and "ACTION TRACE:" in text) is (coarse or fine)
    assert text.endswith("\n".join(paper_output_format()))


def test_every_row_has_a_one_line_description():
    from adaptrubric_local.stages.fusion import ABLATION_INPUTS, ABLATIONS

    assert list(ABLATION_INPUTS) == list(ABLATIONS)
    assert all("\n" not in d and "screenshots" in d for d in ABLATION_INPUTS.values())
    assert "no compiled evidence, no action trace" in ABLATION_INPUTS["no_both"]


def test_prompt_file_lacking_an_ablation_variant_is_rejected(tmp_path):
    import yaml

    from adaptrubric_local.prompts import DEFAULT_PROMPTS
    from adaptrubric_local.schema import SchemaError

    doc = yaml.safe_load(DEFAULT_PROMPTS.read_text())
    del doc["cue_block_no_meta"]
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(SchemaError) as exc:
        load_prompts(p)
    assert "cue_block_no_meta" in str(exc.value) and str(p) in str(exc.value)
