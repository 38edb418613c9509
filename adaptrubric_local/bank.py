"""The rubric bank: schema, loading, lookup and content hash (paper §4.1, Appendix H.1).

A bank is a YAML file of eight family entries plus a shared meta rule; `lookup` does the paper's
top-1 retrieval with the `general` fallback. Knows nothing about routing, prompts or models.
"""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .schema import load_yaml_model
from .types import FAMILIES

DEFAULT_BANK = Path(__file__).parent / "data" / "default_bank.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RubricItem(_Strict):
    """A named rubric item with its criticality (kept for structured ablations)."""

    id: str
    name: str
    criticality: Literal["critical", "default", "auxiliary"]


class RubricSet(_Strict):
    """One family's coarse rubric: description, the four sections, and rubric items."""

    id: str
    categories: list[str] = Field(min_length=1)
    description: str
    verification_steps: list[str] = Field(min_length=1)
    common_pitfalls: list[str] = Field(min_length=1)
    special_rules: list[str] = Field(min_length=1)
    output_format: str
    rubric_items: list[RubricItem] = Field(min_length=1)

    @property
    def critical_items(self) -> list[RubricItem]:
        """The items marked critical (what the fine-cue prompt receives)."""
        return [i for i in self.rubric_items if i.criticality == "critical"]


class RubricBank(_Strict):
    """A whole bank: every family's RubricSet, the shared meta rule and output formats."""

    version: int
    name: str
    source: Optional[str] = None
    output_formats: dict[str, str] = Field(min_length=1)
    meta_rule: list[str] = Field(min_length=1)
    families: dict[str, RubricSet]

    @field_validator("families")
    @classmethod
    def _all_families(cls, fams: dict[str, RubricSet]) -> dict[str, RubricSet]:
        unknown = set(fams) - set(FAMILIES)
        if unknown:
            raise ValueError(f"unknown families {sorted(unknown)}; allowed: {', '.join(FAMILIES)}")
        missing = [f for f in FAMILIES if f not in fams]
        if missing:
            raise ValueError(f"missing families {missing}")
        return fams

    @model_validator(mode="after")
    def _formats_exist(self) -> "RubricBank":
        for fam, rs in self.families.items():
            if rs.output_format not in self.output_formats:
                raise ValueError(f"families.{fam}.output_format names {rs.output_format!r}, which is not "
                                 f"in output_formats ({', '.join(self.output_formats)})")
        return self

    @property
    def sha(self) -> str:
        """Content hash: sha256 of the validated bank as canonical JSON (first 16 hex digits)."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    def lookup(self, category: str) -> RubricSet:
        """Top-1 retrieval: the set whose categories contain `category`, else the wildcard set."""
        for rs in self.families.values():
            if category in rs.categories:
                return rs
        for rs in self.families.values():
            if "*" in rs.categories:
                return rs
        return self.families["general"]

    def output_format(self, rs: RubricSet) -> str:
        """The output-format text a rubric set refers to."""
        return self.output_formats[rs.output_format]


@lru_cache(maxsize=8)
def _load_cached(path: str) -> RubricBank:
    return load_yaml_model(path, RubricBank)


def load_bank(path: str | Path | None = None) -> RubricBank:
    """Load and validate a bank (default: the bundled one); raises SchemaError naming file and field."""
    return _load_cached(str(Path(path or DEFAULT_BANK).resolve()))
