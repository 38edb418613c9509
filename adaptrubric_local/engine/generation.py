"""Generation controls for the transformers engine.

`WatchRecorder` records the probabilities of a few watched tokens at every generation step;
`RowStop` ends each row at its own new-token cap or right after a complete line starting with its
prefix outside the model's thinking (`thinking.py`); `OutOfMemory`/`is_oom` name what the engine
retries in halves. Knows nothing about batching policy, loading or verdicts.
"""
from __future__ import annotations

import torch
from transformers import StoppingCriteria

from ..thinking import visible_line


class WatchRecorder:
    """A logits processor that records, at every generation step, the softmax probabilities of a few
    watched token ids (not every step's full-vocabulary logits) and passes the scores through unchanged;
    they stay on the scores' device until `stacked` copies them to the host once."""

    def __init__(self, token_ids: list[int]):
        self.ids = torch.tensor(token_ids, dtype=torch.long)
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.ids.device != scores.device:  # once per generate call, not per step
            self.ids = self.ids.to(scores.device)
        self.steps.append(torch.softmax(scores.float(), dim=-1).index_select(-1, self.ids))
        return scores

    def stacked(self) -> torch.Tensor | None:
        """(batch, steps, watched) on the CPU, or None before the first step."""
        return torch.stack(self.steps, dim=1).cpu() if self.steps else None


class RowStop(StoppingCriteria):
    """Per-row stopping over token ids: a row is done at its own new-token cap, or right after a
    complete line (ended by a newline token) that starts with the row's prefix outside the model's
    thinking. Only rows that just produced a newline decode their current line, each line once, in
    order, so whether the row is inside `<think>` is followed line by line (`opened[row]`: its prompt
    opened a thinking block). `ends[row]` is the number of tokens a row kept when its line stopped it."""

    def __init__(self, tokenizer, newline: torch.Tensor, prefixes: list[str | None], caps: list[int],
                 prompt_len: int, opened: list[bool] | None = None):
        self.tok, self.newline, self.prefixes, self.caps = tokenizer, newline, prefixes, caps
        self.prompt_len = prompt_len
        self.line_start = [prompt_len] * len(caps)
        self.fragment = [False] * len(caps)  # the current line starts inside a token that ended the last one
        self.inside = list(opened) if opened is not None else [False] * len(caps)  # inside thinking
        self.ends: dict[int, int] = {}
        self.done: torch.Tensor | None = None
        self.watching = any(p is not None for p in prefixes)

    def __call__(self, input_ids: torch.Tensor, scores=None, **kwargs) -> torch.Tensor:
        dev = input_ids.device
        if self.done is None:
            self.done = torch.zeros(len(self.caps), dtype=torch.bool, device=dev)
            self._caps = torch.tensor(self.caps, device=dev)
            self._watch = torch.tensor([p is not None for p in self.prefixes], device=dev)
            self.newline = self.newline.to(dev)
        n = input_ids.shape[1] - self.prompt_len
        self.done |= self._caps <= n
        if not self.watching:  # caps only: device work, no host read
            return self.done.clone()
        last = input_ids[:, -1]
        hit = self.newline[last.clamp(max=self.newline.numel() - 1)] & self._watch & ~self.done
        if bool(hit.any()):
            for b in hit.nonzero().flatten().tolist():
                self._line(b, input_ids[b, self.line_start[b]:].tolist(), input_ids.shape[1], n)
        return self.done.clone()

    def _line(self, b: int, ids: list[int], length: int, n: int) -> None:
        parts = self.tok.decode(ids, skip_special_tokens=True).split("\n")
        for line in parts[1:-1] if self.fragment[b] else parts[:-1]:
            visible, self.inside[b] = visible_line(line, self.inside[b])
            if visible is not None and visible.startswith(self.prefixes[b]):
                self.done[b] = True
                self.ends[b] = n
                return
        self.fragment[b] = bool(parts[-1])  # text after the newline inside the same token
        self.line_start[b] = length - 1 if self.fragment[b] else length


class OutOfMemory(RuntimeError):
    """Raised by the fault-injection hook to simulate a CUDA out-of-memory error."""


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, (torch.OutOfMemoryError, OutOfMemory)) or "out of memory" in str(exc).lower()


def newline_table(tokenizer, vocab_size: int) -> torch.Tensor:
    """(vocab_size,) bool: which token ids decode to text containing a newline."""
    n = min(vocab_size, len(tokenizer))
    texts = tokenizer.batch_decode([[i] for i in range(n)], skip_special_tokens=True)
    table = torch.zeros(vocab_size, dtype=torch.bool)
    table[:n] = torch.tensor(["\n" in t for t in texts], dtype=torch.bool)
    return table
