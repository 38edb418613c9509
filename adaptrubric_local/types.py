"""The core values that flow through the pipeline: trajectories in, verdicts out.

Plain dataclasses with no behaviour beyond (de)serialisation. This module knows nothing about
file formats (see `formats/`), rubrics, prompts or models.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

FAMILIES = ("info_query", "create_modify", "delete_cleanup", "communication", "transfer", "state_navigation",
            "composite_workflow", "general")
MISSING_EVIDENCE_VALUES = ("source_missing", "sink_missing", "final_state_ambiguous", "answer_format_mismatch",
                           "global_count_unverified", "subgoal_unverified", "none")


@dataclass
class Step:
    """One agent step: the screenshot seen before acting, and the action taken."""

    screenshot: str | None
    action: str
    action_type: str | None = None
    text: str | None = None
    thought: str | None = None


@dataclass
class Trajectory:
    """A task instruction and the agent's steps; screenshot paths are absolute once loaded."""

    id: str
    instruction: str
    steps: list[Step]
    answer: str | None = None
    platform: str | None = None
    task_id: str | None = None
    label: int | None = None
    source: str | None = field(default=None, compare=False)

    @property
    def screenshots(self) -> list[str]:
        """Paths of the steps that carry a screenshot, in order."""
        return [s.screenshot for s in self.steps if s.screenshot]

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSONL record (without the loader-only `source`)."""
        d = asdict(self)
        d.pop("source")
        d["steps"] = [{k: v for k, v in s.items() if v is not None} for s in d["steps"]]
        return {k: v for k, v in d.items() if v is not None}


@dataclass
class RouteResult:
    """The task family chosen for an instruction, and how it was chosen."""

    category: str
    mode: str  # "rules" | "model" | "fixed"
    raw: str | None = None
    parsed: bool = True


@dataclass
class CueResult:
    """The fine rubric: 0-2 instruction-grounded cues, plus what was dropped and why."""

    cues: list[str] = field(default_factory=list)
    abstained: bool = False
    reason: str | None = None
    dropped: list[dict[str, str]] = field(default_factory=list)
    raw: str | None = None
    parsed: bool = True


@dataclass(frozen=True)
class Verdict:
    """The verifier's judgement of one trajectory; `score` is None unless status is "ok". Frozen: the
    pipeline builds each in one place (`AdaptRubric._verdict`); a changed copy is
    `dataclasses.replace(v, field=value)`."""

    id: str | None = None
    score: int | None = None
    p_success: float | None = None
    p_success_calibrated: float | None = None  # p_success through a calibration file (`--calibration`)
    status: str = "ok"  # "ok" | "unparsed" | "error"
    category: str | None = None
    cues: list[str] = field(default_factory=list)
    evidence_sufficient: bool | None = None
    missing_evidence: str | None = None
    raw: str | None = None
    n_images: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str | None = None
    bank_sha: str | None = None
    error: str | None = None
    parse_error: str | None = None
    trailing_text: bool = False  # text followed the verdict block (allowed when it names no key)
    label: int | None = None
    platform: str | None = None
    task_id: str | None = None
    route_parsed: bool | None = None  # False: the model router's output was unparseable -> general
    dropped_cues: list[dict[str, str]] = field(default_factory=list)
    hit_cap: bool = False  # generation stopped at max_new_tokens (a cut-off output is usually unparsed)
    hit_context: bool = False  # stopped earlier, when prompt + reply filled the model's context length
    cost_tokens: float = 0.0  # tokens of every model call for this trajectory, shared calls split evenly
    cost_calls: float = 0.0  # model calls for this trajectory, shared router/cue calls split evenly
    votes: list[int | None] | None = None  # --votes k: each sample's SCORE, None where it did not parse
    vote_rule: str | None = None  # with votes: the rule that made the verdict of them (votes.py)
    vote_share: float | None = None  # with votes: the share of the parsed votes that say 1

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with every field (None kept, so lines share one shape)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        """Rebuild from a verdict line, ignoring keys this version does not know."""
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})
