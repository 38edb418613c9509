"""The verdict parser: the verifier's text -> Verdict (paper §4.3, output spec of H.2).

Only the final block of the output counts: the trailing run of key lines (`SCORE:`,
`EVIDENCE_SUFFICIENT:`, `MISSING_EVIDENCE:`), after markdown decoration is stripped. All three keys
must be there with valid values; anything else -- text after the block, a truncated block,
conflicting duplicates, an unknown value -- gives status "unparsed" and score None, never a silent
0 or 1. A `SCORE:` line that appears earlier (quoted evidence, reasoning) cannot decide the verdict.
Knows nothing about prompts, models or trajectories.
"""
from __future__ import annotations

import re
from typing import Optional

from .types import MISSING_EVIDENCE_VALUES, Verdict

KEYS = ("SCORE", "EVIDENCE_SUFFICIENT", "MISSING_EVIDENCE")
_DECOR_ONLY = re.compile(r"^[\s`*_#>\-=~|]*$")
_KEY_LINE = re.compile(r"^(SCORE|EVIDENCE[ _]SUFFICIENT|MISSING[ _]EVIDENCE)\s*[:=：]\s*(.*)$", re.I)
_SCORE_VAL = re.compile(r"^\[?\s*([01])\s*\]?(?:\s*(?:/\s*1\b)?\s*(?:\(.*\)|[-–—,;].*)?)?$")


def _clean(line: str) -> str:
    """Strip markdown decoration: quotes, list markers, headings, bold/italic, code ticks."""
    s = line.strip()
    s = re.sub(r"^(?:>\s*)+", "", s)
    s = re.sub(r"^(?:#{1,6}\s*|[-*+•]\s+|\d+[.)]\s+)", "", s)
    s = s.replace("**", "").replace("__", "").replace("`", "")
    s = re.sub(r"^\*(?=\S)|(?<=\S)\*$", "", s)
    return s.strip().rstrip(".").strip()


def _value(key: str, raw: str) -> tuple[Optional[object], Optional[str]]:
    v = raw.strip().strip("*_`\"'").strip().rstrip(".").strip()
    if key == "SCORE":
        m = _SCORE_VAL.match(v)
        if m and not re.match(r"^\[?\s*0\s*/\s*1\s*\]?$", v):
            return int(m.group(1)), None
        return None, f"SCORE value {raw.strip()!r} is not 0 or 1"
    if key == "EVIDENCE_SUFFICIENT":
        low = re.sub(r"^\[|\]$", "", v.lower()).strip()
        if low in ("yes", "no"):
            return low == "yes", None
        return None, f"EVIDENCE_SUFFICIENT value {raw.strip()!r} is not yes/no"
    low = re.sub(r"^\[|\]$", "", v.lower()).strip()
    if low in MISSING_EVIDENCE_VALUES:
        return low, None
    return None, f"MISSING_EVIDENCE value {raw.strip()!r} is not one of {', '.join(MISSING_EVIDENCE_VALUES)}"


def final_block(text: str) -> list[tuple[str, str]]:
    """The trailing key lines of `text` as (KEY, raw value), in order; [] if the text does not end
    with one."""
    block: list[tuple[str, str]] = []
    for line in reversed((text or "").splitlines()):
        if _DECOR_ONLY.match(line):
            continue
        m = _KEY_LINE.match(_clean(line))
        if not m:
            break
        key = m.group(1).upper().replace(" ", "_")
        block.append((key, m.group(2)))
    return list(reversed(block))


def parse_verdict(text: str) -> Verdict:
    """Parse a verifier output into a Verdict; status "unparsed" with a reason when it cannot."""
    v = Verdict(raw=text)

    def fail(why: str) -> Verdict:
        v.status, v.score, v.evidence_sufficient, v.missing_evidence = "unparsed", None, None, None
        v.parse_error = why
        return v

    if not text or not text.strip():
        return fail("empty output")
    block = final_block(text)
    if not block:
        return fail("output does not end with the SCORE / EVIDENCE_SUFFICIENT / MISSING_EVIDENCE lines")
    values: dict[str, object] = {}
    for key, raw in block:
        val, err = _value(key, raw)
        if err:
            return fail(err)
        if key in values and values[key] != val:
            return fail(f"conflicting {key} lines in the final block")
        values[key] = val
    missing = [k for k in KEYS if k not in values]
    if missing:
        return fail(f"final block lacks {', '.join(missing)} (truncated or incomplete output?)")
    v.score = int(values["SCORE"])
    v.evidence_sufficient = bool(values["EVIDENCE_SUFFICIENT"])
    v.missing_evidence = str(values["MISSING_EVIDENCE"])
    return v


def score_value_offset(text: str) -> Optional[int]:
    """Character offset of the 0/1 digit on the final block's SCORE line (for P(SCORE=1)), or None."""
    lines = (text or "").splitlines(keepends=True)
    block = final_block(text)
    if not block or not any(k == "SCORE" for k, _ in block):
        return None
    offset = len(text)
    for line in reversed(lines):
        offset -= len(line)
        if _DECOR_ONLY.match(line):
            continue
        m = _KEY_LINE.match(_clean(line))
        if not m:
            return None
        if m.group(1).upper() == "SCORE":
            digit = re.search(r"(?i)score\W*[:=：]\W*([01])", line)
            return offset + digit.start(1) if digit else None
    return None
