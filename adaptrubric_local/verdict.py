"""The verdict parser: the verifier's text -> Verdict (paper §4.3, output spec of H.2).

The verdict is the last block of key lines (`SCORE:`, `EVIDENCE_SUFFICIENT:`, `MISSING_EVIDENCE:`): a
run of lines that each start with a key once markdown decoration is stripped (blank and
decoration-only lines do not break a run). All three keys must be in it with valid values, and
duplicates must agree. Text after the block is allowed (`trailing_text=True`) unless it mentions a key
followed by a colon anywhere: such text may revise the verdict. Anything else gives status "unparsed"
and score None with the reason, never a silent 0 or 1. Only the answer counts, never the model's
thinking (`thinking.py`). Knows nothing about prompts, models or trajectories.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .thinking import split
from .types import MISSING_EVIDENCE_VALUES, Verdict

KEYS = ("SCORE", "EVIDENCE_SUFFICIENT", "MISSING_EVIDENCE")
_DECOR_ONLY = re.compile(r"^[\s`*_#>\-=~|]*$")
_KEY_LINE = re.compile(r"^(SCORE|EVIDENCE[ _]SUFFICIENT|MISSING[ _]EVIDENCE)\s*[:=：]\s*(.*)$", re.I)
_KEY_MENTION = re.compile(r"\b(?:SCORE|EVIDENCE[ _]SUFFICIENT|MISSING[ _]EVIDENCE)\W{0,3}[:=：]", re.I)
_SCORE_VAL = re.compile(r"^\[?\s*([01])\s*\]?(?:\s*(?:/\s*1\b)?\s*(?:\(.*\)|[-–—,;].*)?)?$")


def _clean(line: str) -> str:
    """Strip markdown decoration: quotes, list markers, headings, bold/italic, code ticks."""
    s = line.strip()
    s = re.sub(r"^(?:>\s*)+", "", s)
    s = re.sub(r"^(?:#{1,6}\s*|[-*+•]\s+|\d+[.)]\s+)", "", s)
    s = s.replace("**", "").replace("__", "").replace("`", "")
    s = re.sub(r"^\*(?=\S)|(?<=\S)\*$", "", s)
    return s.strip().rstrip(".").strip()


def _value(key: str, raw: str) -> tuple[object | None, str | None]:
    v = raw.strip().strip("*_`\"'").strip().rstrip(".").strip()
    if key == "SCORE":
        m = _SCORE_VAL.match(v)
        if m and not re.match(r"^\[?\s*0\s*/\s*1\s*\]?$", v):
            return int(m.group(1)), None
        return None, f"SCORE value {raw.strip()!r} is not 0 or 1"
    low = re.sub(r"^\[|\]$", "", v.lower()).strip()
    if key == "EVIDENCE_SUFFICIENT":
        if low in ("yes", "no"):
            return low == "yes", None
        return None, f"EVIDENCE_SUFFICIENT value {raw.strip()!r} is not yes/no"
    if low in MISSING_EVIDENCE_VALUES:
        return low, None
    return None, f"MISSING_EVIDENCE value {raw.strip()!r} is not one of {', '.join(MISSING_EVIDENCE_VALUES)}"


@dataclass
class KeyLine:
    """One key line of a verdict block: the key, its raw value, and where the line starts."""

    key: str
    raw: str
    offset: int
    line: str


@dataclass
class Block:
    """The last block of key lines in a text, and the text that follows it."""

    lines: list[KeyLine]
    trailing: str


def last_block(text: str) -> Block | None:
    """The last run of consecutive key lines in `text` and the text after it; None if there is none."""
    block: list[KeyLine] = []
    in_run, end, offset = False, 0, 0
    for line in (text or "").splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        if _DECOR_ONLY.match(line):
            continue
        m = _KEY_LINE.match(_clean(line))
        if not m:
            in_run = False
            continue
        if not in_run:
            block, in_run = [], True
        block.append(KeyLine(m.group(1).upper().replace(" ", "_"), m.group(2), start, line))
        end = offset
    return Block(lines=block, trailing=text[end:]) if block else None


def parse_verdict(text: str, opened: bool = False) -> Verdict:
    """Parse a verifier output into a Verdict; status "unparsed" with a reason when it cannot. Only its
    answer is read, not its thinking (`opened`: the output starts inside a thinking block its prompt
    opened); `raw` keeps the whole output."""
    trailing = False

    def fail(why: str) -> Verdict:
        return Verdict(raw=text, status="unparsed", parse_error=why, trailing_text=trailing)

    if (not text or not text.strip()) and not opened:
        return fail("empty output")
    answer = split(text, opened)
    if answer.unfinished:
        return fail("the output ends inside its thinking (no </think>): no answer after it (cut by the token cap?)")
    block = last_block(answer.answer)
    if block is None:
        return fail("output has no SCORE / EVIDENCE_SUFFICIENT / MISSING_EVIDENCE lines")
    trailing = any(not _DECOR_ONLY.match(x) for x in block.trailing.splitlines())  # not blank or decoration only
    mention = _KEY_MENTION.search(block.trailing)
    if mention:
        return fail(f"text after the last verdict block mentions {mention.group(0).strip()!r}")
    values: dict[str, object] = {}
    for k in block.lines:
        val, err = _value(k.key, k.raw)
        if err:
            return fail(err)
        if k.key in values and values[k.key] != val:
            return fail(f"conflicting {k.key} lines in the final block")
        values[k.key] = val
    missing = [k for k in KEYS if k not in values]
    if missing:
        return fail(f"final block lacks {', '.join(missing)} (truncated or incomplete output?)")
    return Verdict(raw=text, score=int(values["SCORE"]), evidence_sufficient=bool(values["EVIDENCE_SUFFICIENT"]),
                   missing_evidence=str(values["MISSING_EVIDENCE"]), trailing_text=trailing)


def score_value_offset(text: str, opened: bool = False) -> int | None:
    """Character offset in `text` of the 0/1 digit on the SCORE line of the block `parse_verdict`
    judges (its last SCORE line, in the answer), for P(SCORE=1); None if there is no such block or
    line."""
    answer = split(text, opened)
    block = None if answer.unfinished else last_block(answer.answer)
    if block is None or _KEY_MENTION.search(block.trailing):
        return None
    last = next((k for k in reversed(block.lines) if k.key == "SCORE"), None)
    digit = re.search(r"(?i)score\W*[:=：]\W*([01])", last.line) if last else None
    return answer.offset_in_output(last.offset + digit.start(1)) if digit else None
