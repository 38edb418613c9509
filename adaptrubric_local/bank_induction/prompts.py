"""The induction and refinement prompts as data: strict schema, exact placeholders, content hash.

Knows nothing about trajectories, banks or teachers: callers pass plain strings to `render`.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from ..prompts import PromptFile, load_prompt_file, prompt_schema

DEFAULT_INDUCTION_PROMPTS = Path(__file__).resolve().parent.parent / "prompts" / "induction.yaml"

_EVIDENCE = {"id", "label", "instruction", "agent_answer", "typed_texts", "key_actions", "action_trace"}
REQUIRED = {
    "trajectory": {"n_images", *_EVIDENCE},
    "dimensions": {"n_trajectories", "domain", "trajectories"},
    "dimensions_suffix": set(),
    "grouping": {"domain", "dimensions", "instructions", "max_families", "fallback"},
    "grouping_keep": {"domain", "families", "dimensions", "instructions"},
    "refine": {"family", "description", "rubric", "n_agree", "n_cases", "cases"},
    "case": {"n", "verdict", "verifier_output", *_EVIDENCE},
}


class _InductionFields(PromptFile):
    path: str = ""  # set by the loader
    sha: str = ""  # set by the loader: sha256 of the file, 16 hex digits


InductionPrompts = prompt_schema("InductionPrompts", __name__, "The teacher prompts of bank induction and refinement.",
                                 _InductionFields, REQUIRED)


@lru_cache(maxsize=4)
def _load(path: str) -> InductionPrompts:
    ps = load_prompt_file(path, InductionPrompts, REQUIRED)
    sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    return ps.model_copy(update={"path": path, "sha": sha})


def load_induction_prompts(path: str | Path | None = None) -> InductionPrompts:
    """Load and check an induction prompt set (default: the bundled one)."""
    return _load(str(Path(path or DEFAULT_INDUCTION_PROMPTS).resolve()))
