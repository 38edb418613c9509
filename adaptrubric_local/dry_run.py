"""Stand-ins for a real verifier that know the pipeline's own prompts, for tests, dry runs and demos
(the engine package knows no stage): `pipeline_script` answers the pipeline's three prompts,
`FakeEngine` is engine.fake.ScriptedEngine with it as its default script, and `tokenizer_corpus` is
the text the tiny random model's tokenizer is trained on. Knows nothing about trajectories or scoring.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from .bank import DEFAULT_BANK
from .engine import fake
from .engine.base import Request
from .prompts import DEFAULT_PROMPTS
from .route import route_rules

_ROUTER_INSTRUCTION = re.compile(r"TASK INSTRUCTION:\n(.*?)\n\nCATEGORIES", re.S)


def pipeline_script(req: Request) -> str:
    """Plausible answers to the pipeline's three prompts; a router prompt is routed by the rules."""
    if req.kind == "route":
        m = _ROUTER_INSTRUCTION.search(req.prompt)
        return f"CATEGORY: {route_rules(m.group(1) if m else '').category}"
    return fake.default_script(req)


class FakeEngine(fake.ScriptedEngine):
    """The scripted engine (engine.fake.ScriptedEngine) answering with `pipeline_script` unless given a script."""

    def __init__(self, script: Callable[[Request], str] | None = None, **kwargs):
        super().__init__(script or pipeline_script, **kwargs)


def tokenizer_corpus() -> list[str]:
    """The tiny model tokenizer's training text: the bundled prompts and bank, and the verdict lines."""
    text = DEFAULT_PROMPTS.read_text() + DEFAULT_BANK.read_text()
    extra = ("SCORE: 0\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\nEVIDENCE_SUFFICIENT: no\nMISSING_EVIDENCE: none\n"
             "CATEGORY: info_query\nNO_HINT: the coarse rubric covers the task.\nCUE_1: Pay attention to whether\n"
             "0123456789 The agent tapped typed opened the app settings note message file folder.\n")
    # runs of newlines, as a thinking model's answer starts: Qwen's real vocabulary merges them ("\n\n",
    # "\n\n\n"), which is what moves a label boundary found by counting tokens of prompt + target together
    newlines = "".join(f"{w}{nl}" for w in ("Reasoning.", "SCORE: 1", "</think>") for nl in ("\n\n", "\n\n\n")) * 20
    return [text, extra, newlines] * 3
