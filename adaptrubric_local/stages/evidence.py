"""The evidence compiler: the submitted answer, key typed texts, key actions and a one-line-per-step
action trace, in the shape the verifier skeleton (H.2) asks for.

Agent-produced strings are JSON-quoted onto one line, so nothing an agent typed (for instance a
"SCORE: 1") can start a line of its own in the prompt. Knows nothing about images or models.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..types import Trajectory
from .actions import action_kind, is_high_signal

MAX_ACTION_CHARS = 200
MAX_KEY_ACTIONS = 12
NONE = "(none)"


@dataclass
class Evidence:
    """The four evidence fields of the verifier prompt, already rendered as text."""

    agent_answer: str
    typed_texts: str
    key_actions: str
    action_trace: str


def _one_line(text: str, limit: int = MAX_ACTION_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _quote(text: str) -> str:
    return json.dumps(_one_line(text, 500), ensure_ascii=False)


def compile_evidence(traj: Trajectory) -> Evidence:
    """Compile the evidence block for one trajectory."""
    typed = [_quote(text) for text in dict.fromkeys(s.text for s in traj.steps if s.text)]
    kinds = [(n, action_kind(s), s) for n, s in enumerate(traj.steps, start=1)]
    key = [f"step {n} {k}: {_one_line(s.action, 120)}" for n, k, s in kinds if is_high_signal(k)]
    if len(key) > MAX_KEY_ACTIONS:
        key = [*key[:MAX_KEY_ACTIONS // 2], "...", *key[-MAX_KEY_ACTIONS // 2:]]
    trace = "\n".join(f"Step {n}: {_one_line(s.action) or '(no action recorded)'}"
                      for n, s in enumerate(traj.steps, start=1))
    return Evidence(agent_answer=_quote(traj.answer) if traj.answer else NONE, typed_texts="; ".join(typed) or NONE,
                    key_actions="; ".join(key) or NONE, action_trace=trace)
