"""The one batched engine interface every backend implements.

A Request is a text prompt, the images that follow it, and optional text after the images; a batch
of requests goes in, one Output per request comes out, in order. A request that fails on its own
(a corrupt image) comes back as an Output with `error` set; it never sinks the batch. `watch` asks
for the probabilities of the watched strings at every generated position holding one of them (how
P(SCORE=1) is read without a second forward pass); `next_token_probs` gives those of given next
tokens after a prompt and an assistant prefix. `stop_after_line` ends a row after its first complete
line outside the model's thinking (`thinking.py`) that starts with the given text. `Output.hit_cap`
says the new-token cap cut a row, `Output.hit_context` that the model's context length did first: the
fixes differ, so the reasons are kept apart (`length_reason`). `Output.reasoning` is a thinking
model's reasoning when a backend returns it apart; `Output.opened_thinking` says the text starts
inside a thinking block its prompt opened. `generate_iter` hands outputs over in lists of those
ready together, so a caller can write results before the whole batch is done.
The engine knows nothing about rubrics, routing or verdicts.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..thinking import visible_line


@dataclass
class Request:
    """One model call: prompt text, then images in order, then suffix text."""

    prompt: str
    images: list[str] = field(default_factory=list)
    suffix: str = ""
    max_new_tokens: int | None = None
    watch: tuple[str, ...] = ()
    kind: str = "verify"  # accounting label: "route" | "cue" | "verify"
    tag: str | None = None  # caller's id for error messages
    stop_after_line: str | None = None  # end the row after the first complete line starting with this

    def cap(self, engine_cap: int) -> int:
        """The new tokens this request may generate: its own cap, never past the engine's."""
        return min(engine_cap, self.max_new_tokens or engine_cap)


@dataclass
class TokenProbs:
    """Probabilities of the watched tokens at one generated position; `offset` is the character
    offset in the output text where the generated token starts."""

    offset: int
    probs: dict[str, float]


@dataclass
class Output:
    """What the engine produced for one Request."""

    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    token_probs: list[TokenProbs] = field(default_factory=list)
    n_images: int = 0
    visual_tokens: int = 0
    error: str | None = None
    samples: list[tuple[str, list[TokenProbs]]] = field(default_factory=list)  # all k texts when voting
    hit_cap: bool = False  # stopped by max_new_tokens (any sample, when voting), not by EOS or stop_after_line
    hit_context: bool = False  # stopped before max_new_tokens because prompt + reply filled the context length
    reasoning: str | None = None  # a thinking model's separate reasoning text (an endpoint's reasoning_content)
    opened_thinking: bool = False  # the text starts inside a thinking block its prompt opened (see thinking.py)


class Engine(ABC):
    """A batched text(+image) generator."""

    name: str = "engine"
    config: object | None = None  # a backend's settings dataclass (recorded in provenance); none if scripted

    @abstractmethod
    def generate(self, requests: list[Request]) -> list[Output]:
        """Generate one Output per Request, in order."""

    def generate_iter(self, requests: list[Request]) -> Iterator[list[tuple[int, Output]]]:
        """Lists of (index into `requests`, its Output), each list the outputs that became ready
        together, until every request has its Output; by default one list, after `generate`."""
        if requests:
            yield list(enumerate(self.generate(requests)))

    def next_token_probs(self, requests: list[Request], prefixes: list[str],
                         candidates: tuple[str, ...] = ("0", "1")) -> list[dict[str, float]]:
        """P(next token = c) for each candidate c, after each request and assistant prefix."""
        raise NotImplementedError(f"{type(self).__name__} does not expose next-token probabilities")

    @property
    def stats(self) -> dict:
        """Counters a backend keeps (batches, rows, out-of-memory splits); none by default."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op unless a backend holds resources
        """Release resources (threads, GPU memory)."""


def length_reason(completion_tokens: int | None, cap: int) -> str:
    """Why a reply that ended at a length limit (`finish_reason: length`) ended there: "cap" when it
    used the whole new-token cap (or its length is unknown), "context" when it is shorter, so the
    model's context length cut it."""
    return "cap" if completion_tokens is None or completion_tokens >= cap else "context"


def cut_after_line(text: str, prefix: str, opened: bool = False) -> str | None:
    """`text` up to and including the first line outside the thinking (`opened`: the text starts inside
    it) that starts with `prefix` and is complete (ended by a newline, which is kept, or by the end of
    the text); None when there is no such line."""
    inside, end = opened, 0
    for line in text.split("\n"):
        end += len(line) + 1  # past the line's newline (the last line has none)
        visible, inside = visible_line(line, inside)
        if visible is not None and visible.startswith(prefix):
            return text[:end]
    return None


def watched_offsets(tokenizer, ids: list[int], wanted) -> Iterator[tuple[int, int]]:
    """(position, text offset) of each generated token in `wanted` (token ids): the length of the text
    the tokens before it decode to, decoded piece by piece from one watched token to the next (not the
    whole prefix per token). Exact for a byte-level decoder when the watched tokens are whole ASCII
    characters (the SCORE digits): a piece then never splits a character."""
    offset, start = 0, 0
    for j, t in enumerate(ids):
        if t in wanted:
            offset += len(tokenizer.decode(ids[start:j], skip_special_tokens=True))
            start = j
            yield j, offset
