"""Criterion fusion R = Rc (+) Rf and the verifier prompt (paper §4.3, Appendix H.2-H.3).

The coarse rubric Rc (the family's verification steps, pitfalls and special rules, plus the meta rule)
is the body; the fine cues Rf are the cue block, omitted when there are none. Two switches give the
four rows of Table 4 (§5.4; `ABLATION_INPUTS` says what each row's prompt holds): coarse off drops the
rubric and meta rule (the cue block then does not refer to the META RULE); fine off drops the cue
block; both off uses the image-only skeleton (no evidence, no action trace). The output format is
always kept. Knows nothing about routing, models or images.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from ..bank import RubricBank, RubricSet
from ..prompts import PromptSet, render
from .evidence import Evidence

ABLATIONS = {"full": (True, True), "no_fine": (True, False), "no_coarse": (False, True), "no_both": (False, False)}

# What the verifier prompt of each Table 4 row holds, one line each (for reports).
ABLATION_INPUTS = {
    "full": "instruction, compiled evidence (answer, typed text, key actions), action trace, family rubric "
            "+ meta rule, cue block (when cues exist), screenshots, output format",
    "no_fine": "instruction, compiled evidence, action trace, family rubric + meta rule, screenshots, "
               "output format (no cue block)",
    "no_coarse": "instruction, compiled evidence, action trace, cue block (when cues exist; without its "
                 "META RULE reference), screenshots, output format (no family rubric, no meta rule)",
    "no_both": "instruction, screenshots, output format only (no compiled evidence, no action trace, "
               "no rubric, no cues)",
}


@dataclass
class VerifierPrompt:
    """The verifier prompt split around where the screenshots go: text, [images], suffix."""

    text: str
    suffix: str

    @property
    def full(self) -> str:
        """Prompt text with the screenshots' place marked, as one string."""
        return f"{self.text}\n\n{self.suffix}"


def _section(heading: str, items: list[str], numbered: bool = False) -> str:
    return "\n".join([heading, *(f"{n}. {it}" if numbered else f"- {it}" for n, it in enumerate(items, start=1))])


def coarse_sections(prompts: PromptSet, bank: RubricBank, rs: RubricSet) -> dict[str, str]:
    """The rendered Rc: verification steps, pitfalls, and special rules followed by the meta rule."""
    h = prompts.headings
    return {
        "verification_steps": _section(h.verification_steps, list(rs.verification_steps), numbered=True),
        "common_pitfalls": _section(h.common_pitfalls, list(rs.common_pitfalls)),
        "special_rules": _section(h.special_rules, list(rs.special_rules)) + "\n\n"
        + _section(h.meta_rule, list(bank.meta_rule)),
    }


def cue_block(prompts: PromptSet, cues: list[str], meta_rule: bool = True) -> str:
    """The rendered Rf block, or "" when there are no cues (Phi(Rc, {}) = Rc). `meta_rule=False`
    (the prompt has no meta rule) uses the variant that does not refer to it."""
    name = "cue_block" if meta_rule else "cue_block_no_meta"
    return render(getattr(prompts, name), name, cue_bullets="\n".join(f"- {c}" for c in cues)) if cues else ""


def _split(text: str, output_format: str) -> VerifierPrompt:
    """The rendered prompt, runs of blank lines made one, split before its output format."""
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return VerifierPrompt(text=text[: text.rindex(output_format)].rstrip(), suffix=output_format)


def fuse(prompts: PromptSet, bank: RubricBank, rs: RubricSet, instruction: str, evidence: Evidence,
         cues: list[str], coarse: bool = True, fine: bool = True) -> VerifierPrompt:
    """Render the verifier prompt for one trajectory under the given ablation switches."""
    output_format = bank.output_format(rs)
    if not (coarse or fine):  # w/o Both: instruction and screenshots only
        return _split(render(prompts.verifier_image_only, "verifier_image_only", instruction=instruction,
                             output_format=output_format), output_format)
    sections = coarse_sections(prompts, bank, rs) if coarse else dict.fromkeys(
        ("verification_steps", "common_pitfalls", "special_rules"), "")
    text = render(prompts.verifier, "verifier", instruction=instruction, **asdict(evidence),
                  additional_attention=cue_block(prompts, cues, meta_rule=coarse) if fine else "",
                  output_format=output_format, **sections)
    return _split(text, output_format)
