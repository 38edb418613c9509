"""What part of a model's output is thinking: the one definition the stop criterion, the verdict
parser, the distillation records and the remote engine share.

A thinking model writes its reasoning between `<think>` and `</think>` and its answer after; a Thinking
checkpoint's chat template opens the block itself, so its output starts inside the thinking
(`opened=True`). Text between `<think>` and the next `</think>` is thinking, and so is everything
before a `</think>` that closes nothing; everything else is the answer. A `<think>` never closed
leaves the output `unfinished`: no answer, so no verdict. Knows nothing about verdicts, engines or tokens.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

OPEN, CLOSE = "<think>", "</think>"
_TAG = re.compile(r"</?think>")


@dataclass(frozen=True)
class Split:
    """An output split into its visible answer and its thinking."""

    answer: str  # the text outside every thinking block, leading whitespace stripped
    thinking: str | None  # the thinking blocks' text, stripped, joined by blank lines; None if none
    unfinished: bool  # the output ends inside a thinking block
    spans: tuple[tuple[int, int], ...]  # where the answer's characters lie in the output, in order

    def offset_in_output(self, i: int) -> int:
        """The output offset of the answer's character `i`."""
        for a, b in self.spans:
            if i < b - a:
                return a + i
            i -= b - a
        raise IndexError("offset past the end of the answer")


def _scan(text: str, inside: bool) -> tuple[list[tuple[int, int]], list[tuple[int, int]], bool]:
    """(answer spans, thinking spans, inside at the end) of `text` starting inside thinking or not."""
    answer: list[tuple[int, int]] = []
    thought: list[tuple[int, int]] = []
    pos = 0
    for m in _TAG.finditer(text):
        piece = (pos, m.start())
        if m.group(0) == OPEN:
            (thought if inside else answer).append(piece)
            inside = True
        elif inside:
            thought.append(piece)
            inside = False
        else:  # a close that closes nothing: everything so far was thinking opened by the prompt
            thought = [(a, b) for a, b in sorted(answer + thought + [piece])]
            answer = []
        pos = m.end()
    (thought if inside else answer).append((pos, len(text)))
    return answer, thought, inside


def split(text: str, opened: bool = False) -> Split:
    """`text` (an output; `opened`: its prompt opened a thinking block) as answer and thinking."""
    text = text or ""
    spans, thought, inside = _scan(text, opened)
    spans = [(a, b) for a, b in spans if b > a]
    while spans and not text[spans[0][0]:spans[0][1]].strip():
        spans.pop(0)
    if spans:  # strip the answer's leading whitespace (what a reasoning parser leaves)
        a, b = spans[0]
        spans[0] = (a + len(text[a:b]) - len(text[a:b].lstrip()), b)
    thinking = "\n\n".join(t for t in (text[a:b].strip() for a, b in thought) if t)
    return Split("".join(text[a:b] for a, b in spans), thinking or None, inside, tuple(spans))


def prompt_opens(prompt: str) -> bool:
    """Whether a rendered prompt ends inside a thinking block its reply continues (the generation
    prompt of a Thinking checkpoint's chat template): its last turn holds an unclosed `<think>`."""
    turn = prompt.rpartition("<|im_start|>")[2] if "<|im_start|>" in prompt else prompt[-64:]
    return _scan(turn, False)[2]


def visible_line(line: str, inside: bool) -> tuple[str | None, bool]:
    """(the part of one complete output line that is answer and starts an answer line, or None; whether
    the output is inside thinking after it), given whether it was inside thinking before the line.
    A line that ends inside thinking has no such part; one with a tag keeps the text after its last
    tag."""
    tags = list(_TAG.finditer(line))
    if tags:  # the last tag decides; the answer part is what follows it
        inside, line = tags[-1].group(0) == OPEN, line[tags[-1].end():]
    return (None if inside else line), inside
