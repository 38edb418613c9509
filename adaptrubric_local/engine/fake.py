"""A scripted engine for tests and dry runs: no model, deterministic answers, real accounting.
`script(request) -> str` decides each output (default: by the request's kind, `default_script`;
`adaptrubric_local.dry_run`'s reads the pipeline's prompts). Token counts are whitespace words (+ a
fixed cost per image); P(SCORE=1) comes through `watch` from `p_score(request, digit)` (None: no
probability, as a server without logprobs). Every batch is recorded in `batches`. As by a real
engine, a text is cut after its `stop_after_line` line and to `max_new_tokens` words (`hit_cap`).
"""
from __future__ import annotations

import re
from collections.abc import Callable

from .base import Engine, Output, Request, TokenProbs, cut_after_line

TOKENS_PER_IMAGE = 100


def default_script(req: Request) -> str:
    """Fixed answers for the three kinds of request (the prompt is not read)."""
    if req.kind == "route":
        return "CATEGORY: general"
    if req.kind == "cue":
        return "NO_HINT: the coarse rubric already covers this task."
    return ("The final screen shows the requested outcome.\n"
            "SCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none")


class ScriptedEngine(Engine):
    """Deterministic scripted engine with call and token accounting."""

    def __init__(self, script: Callable[[Request], str] | None = None,
                 p_score: Callable[[Request, str], float | None] | None = None, name: str = "fake",
                 fail: Callable[[Request], str | None] | None = None):
        self.script = script or default_script
        self.p_score = p_score or (lambda req, digit: 0.9 if digit == "1" else 0.1)
        self.fail = fail
        self.name = name
        self.batches: list[list[Request]] = []

    def _one(self, req: Request) -> Output:
        if err := self.fail is not None and self.fail(req):
            return Output(error=err, n_images=len(req.images))
        text = self.script(req)  # as generation would leave it: stopped after the line, then capped in words
        if req.stop_after_line:
            text = cut_after_line(text, req.stop_after_line) or text
        hit_cap = req.max_new_tokens is not None and len(text.split()) > req.max_new_tokens
        if hit_cap:
            m = re.match(rf"\s*(?:\S+\s+){{{req.max_new_tokens}}}", text)
            text = m.group(0).rstrip() if m else text
        found = re.finditer(r"(?i)score\W*[:=]\W*([01])", text) if req.watch else ()
        scored = ((m, self.p_score(req, m.group(1))) for m in found)
        probs = [TokenProbs(offset=m.start(1), probs={"1": p1, "0": 1.0 - p1}) for m, p1 in scored if p1 is not None]
        n_prompt = len((req.prompt + " " + req.suffix).split()) + TOKENS_PER_IMAGE * len(req.images)
        return Output(text=text, prompt_tokens=n_prompt, completion_tokens=len(text.split()),
                      token_probs=probs, n_images=len(req.images), visual_tokens=TOKENS_PER_IMAGE * len(req.images),
                      hit_cap=hit_cap)

    def generate(self, requests: list[Request]) -> list[Output]:
        self.batches.append(list(requests))
        return [self._one(r) for r in requests]

    def next_token_probs(self, requests, prefixes, candidates=("0", "1")):
        out = []
        for req, _prefix in zip(requests, prefixes):
            p1 = self.p_score(req, "1")
            if p1 is None:
                raise NotImplementedError("this scripted engine reports no probabilities")
            out.append({c: (p1 if c == "1" else 1.0 - p1) if c in ("0", "1") else 0.0 for c in candidates})
        return out
