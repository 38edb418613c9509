"""The fine stage h(I, c, Rc): 0-2 instruction-grounded attention cues, or abstention (paper §4.2, H.3).

Renders the paper's fine-cue prompt and parses `NO_HINT: ...` or `CUE_1:` / `CUE_2:`. By default only
cues beyond the second are dropped (the paper's two cue slots). Off by default, not in the paper (H.3's
rules 4 and 8 are instructions to the generator): `filter_words` drops a cue with an over-constraining
word the instruction does not use, `limit_length` one over 40 words. Every dropped cue is recorded
with its reason. Knows nothing about engines or trajectories.
"""
from __future__ import annotations

import re

from ..bank import RubricSet
from ..prompts import PromptSet, render
from ..types import CueResult

MAX_CUES = 2
MAX_WORDS = 40

_LINE = re.compile(r"^[\s>*#`\-]*(NO_HINT|CUE_\d+)\s*\**\s*[:：]\s*(.*?)[\s*`]*$", re.I)

# rule 4 of H.3: (pattern in the cue, pattern the instruction must contain to allow it, label)
OVERCONSTRAINING = [
    (r"\bvisibl[ey]\b", r"\bvisibl[ey]\b", "visibly"),
    (r"\bexact(?:ly)?\b", r"\bexact(?:ly)?\b", "exactly"),
    (r"\bevery\b", r"\bevery\b", "every"),
    (r"\ball\b", r"\ball\b", "all"),
    (r"\b(?:saved|persisted|persist(?:s|ence)?)\b", r"\bsav(?:e|ed|ing)\b|\bpersist", "saved/persisted"),
    (r"\bfinal state must show\b", r"(?!x)x", "final state must show"),
]


def cue_prompt(prompts: PromptSet, instruction: str, category: str, rs: RubricSet) -> str:
    """The rendered fine-cue prompt for one instruction (with the critical rubric items, one per line)."""
    return render(prompts.fine_cue, "fine_cue", instruction=instruction, category=category,
                  rubric_items_block="\n".join(f"- {i.id}: {i.name}" for i in rs.critical_items))


def check_cue(cue: str, instruction: str, filter_words: bool = False, limit_length: bool = False) -> str | None:
    """Why a cue must be dropped under the optional filters (None if it may stay)."""
    words = len(cue.split())
    if limit_length and words > MAX_WORDS:
        return f"over {MAX_WORDS} words ({words})"
    low_i = instruction.lower()
    used = (label for pat, allow, label in OVERCONSTRAINING
            if re.search(pat, cue, re.I) and not re.search(allow, low_i, re.I))
    label = next(used, None) if filter_words else None
    return None if label is None else f"over-constraining word '{label}' not used by the instruction (H.3 rule 4)"


def parse_cues(text: str, instruction: str, filter_words: bool = False, limit_length: bool = False) -> CueResult:
    """Parse the fine-cue output; unparseable output abstains with parsed=False. The two filters
    are off by default (not in the paper; see the module docstring)."""
    found: dict[str, str] = {}
    for m in filter(None, (_LINE.match(line.strip()) for line in (text or "").splitlines())):
        found.setdefault(m.group(1).upper(), m.group(2).strip())
    if "NO_HINT" in found and not any(k.startswith("CUE") for k in found):
        return CueResult(abstained=True, reason=found["NO_HINT"] or None, raw=text)
    raw_cues = [found[k] for k in sorted((k for k in found if k.startswith("CUE")), key=lambda k: int(k[4:]))
                if found[k]]
    if not raw_cues:
        return CueResult(abstained=True, reason="unparseable cue output", raw=text, parsed=False)
    result = CueResult(raw=text)
    for n, cue in enumerate(raw_cues):
        why = check_cue(cue, instruction, filter_words, limit_length) if n < MAX_CUES else f"more than {MAX_CUES} cues"
        if why:
            result.dropped.append({"cue": cue, "reason": why})
        else:
            result.cues.append(cue)
    result.abstained = not result.cues
    result.reason = "every cue was dropped" if result.abstained else None
    return result


def manual_cues(cues: list[str], instruction: str, filter_words: bool = False,
                limit_length: bool = False) -> CueResult:
    """Cues given by a user (e.g. `--manual-cues`), held to the same checks as generated ones."""
    if not cues:
        return CueResult(abstained=True, reason="no cues given")
    return parse_cues("\n".join(f"CUE_{i + 1}: {c}" for i, c in enumerate(cues)), instruction,
                      filter_words=filter_words, limit_length=limit_length)
