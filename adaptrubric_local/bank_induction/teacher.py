"""Talking to the teacher: one batch of requests in, replies parsed into small schemas, every call
logged as a JSON line the moment it returns (so a run that dies keeps what the teacher said).

A reply is one JSON object, possibly inside a ```json fence or after some prose; `parse_reply`
finds it and validates it, or says why it could not. An unparseable reply is reported as such,
never guessed at. Knows nothing about banks or trajectories.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..engine.base import Engine, Output, Request

M = TypeVar("M", bound=BaseModel)


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Dimension(_Reply):
    """One verification dimension that separates success from failure."""

    name: str
    check: str
    failure_pattern: str = ""
    task_kind: str = ""
    evidence: list[str] = Field(default_factory=list)


class DimensionsReply(_Reply):
    """The teacher's answer to the dimensions prompt."""

    dimensions: list[Dimension] = Field(min_length=1)


class ItemReply(_Reply):
    """A rubric item the teacher proposes."""

    name: str
    criticality: Literal["critical", "default", "auxiliary"] = "default"


class FamilyReply(_Reply):
    """One family of the teacher's grouping (texts optional when keeping the paper's families)."""

    name: str
    router_description: str | None = None
    description: str | None = None
    verification_steps: list[str] | None = Field(default=None, min_length=1)
    common_pitfalls: list[str] | None = Field(default=None, min_length=1)
    special_rules: list[str] | None = Field(default=None, min_length=1)
    rubric_items: list[ItemReply] | None = Field(default=None, min_length=1)


class GroupingReply(_Reply):
    """The teacher's answer to the grouping prompt."""

    families: list[FamilyReply] = Field(min_length=1)


class RevisionReply(_Reply):
    """The teacher's revised sections of one family's rubric."""

    verification_steps: list[str] = Field(min_length=1)
    common_pitfalls: list[str] = Field(min_length=1)
    special_rules: list[str] = Field(min_length=1)
    rationale: str = ""


def parse_reply(text: str, model: type[M]) -> tuple[M | None, str | None]:
    """The reply's JSON object validated into `model`, or (None, why it could not be read)."""
    why, text = "no JSON object in the reply", text or ""
    start, end = text.find("{"), text.rfind("}")
    whole = [text[start:end + 1]] if 0 <= start < end else []
    for cand in re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S) + whole:
        try:
            obj = json.loads(cand)
        except json.JSONDecodeError as exc:
            why = f"invalid JSON: {exc}"
            continue
        try:
            return model.model_validate(obj), None
        except ValidationError as exc:
            why = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()[:5])
    return None, why


class Teacher:
    """An engine used as the teacher, with a call log and counters."""

    def __init__(self, engine: Engine, log: Path | None = None, max_new_tokens: int = 2048):
        self.engine, self.log, self.max_new_tokens = engine, log, max_new_tokens
        self.name = engine.name  # as the engine reports it
        self.calls = self.failed = self.tokens = 0

    def ask(self, requests: list[Request], tags: list[str]) -> list[Output]:
        """One Output per request; each is appended to the log as soon as the batch returns.
        An engine that raises is turned into error Outputs for the whole batch."""
        for r in requests:
            r.max_new_tokens = r.max_new_tokens or self.max_new_tokens
        try:
            outs = self.engine.generate(requests)
        except Exception as exc:  # a dead endpoint or a crashed local model: the caller decides
            outs = [Output(error=f"{type(exc).__name__}: {exc}") for _ in requests]
        self.calls += len(requests)
        self.failed += sum(bool(o.error) for o in outs)
        self.tokens += sum(o.prompt_tokens + o.completion_tokens for o in outs)
        if self.log is not None:
            with open(self.log, "a", encoding="utf-8") as f:
                for tag, r, o in zip(tags, requests, outs):
                    f.write(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "tag": tag,
                                        "kind": r.kind, "prompt": r.prompt, "images": r.images, "suffix": r.suffix,
                                        "reply": o.text, "error": o.error, "prompt_tokens": o.prompt_tokens,
                                        "completion_tokens": o.completion_tokens}, ensure_ascii=False) + "\n")
        return outs
