"""The rubric bank: schema, loading, lookup and content hash (paper §4.1, Appendix H.1).

A bank is a YAML file of family entries plus a shared meta rule; `lookup` is the paper's top-1
retrieval with the fallback family (categories ["*"]). `taxonomy: paper` (the default) requires
exactly the paper's eight families; `taxonomy: custom` (see `bank_induction`) allows any snake_case
names and needs one fallback family. `record` says how a bank was built; it is not part of the hash.
Knows nothing about routing, prompts or models.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from .schema import Strict, content_sha, load_yaml_model
from .types import FAMILIES

DEFAULT_BANK = Path(__file__).parent / "data" / "default_bank.yaml"


class RubricItem(Strict):
    """A named rubric item with its criticality (kept for structured ablations)."""

    id: str
    name: str
    criticality: Literal["critical", "default", "auxiliary"]


class RubricSet(Strict):
    """One family's coarse rubric: description, the four sections, and rubric items."""

    id: str
    categories: list[str] = Field(min_length=1)
    description: str
    verification_steps: list[str] = Field(min_length=1)
    common_pitfalls: list[str] = Field(min_length=1)
    special_rules: list[str] = Field(min_length=1)
    output_format: str
    rubric_items: list[RubricItem] = Field(min_length=1)
    router_description: str | None = None  # the router prompt's line for this family (default: see prompts)

    @property
    def critical_items(self) -> list[RubricItem]:
        """The items marked critical (what the fine-cue prompt receives)."""
        return [i for i in self.rubric_items if i.criticality == "critical"]


class BuildStep(Strict):
    """One step that made or changed a bank (induce, a refine round): teacher, data, prompts used."""

    step: str
    teacher: str
    data: str
    prompts: str
    prompts_sha: str
    created: str
    teacher_calls: int = 0
    details: dict[str, str | int | float | bool | None] = Field(default_factory=dict)


FAMILY_NAME = re.compile(r"^[a-z][a-z0-9_]{1,47}$")


class RubricBank(Strict):
    """A whole bank: every family's RubricSet, the shared meta rule and output formats."""

    version: int
    name: str
    source: str | None = None
    taxonomy: Literal["paper", "custom"] = "paper"
    output_formats: dict[str, str] = Field(min_length=1)
    meta_rule: list[str] = Field(min_length=1)
    families: dict[str, RubricSet]
    record: list[BuildStep] = Field(default_factory=list)

    @model_validator(mode="after")
    def _family_set(self) -> RubricBank:
        fams = self.families
        if self.taxonomy == "paper":
            unknown = set(fams) - set(FAMILIES)
            if unknown:
                raise ValueError(f"unknown families {sorted(unknown)}; allowed: {', '.join(FAMILIES)} "
                                 "(a bank with families of its own sets `taxonomy: custom`)")
            missing = [f for f in FAMILIES if f not in fams]
            if missing:
                raise ValueError(f"missing families {missing}")
            return self
        if len(fams) < 2:
            raise ValueError("a custom bank needs at least two families (one of them the fallback)")
        for name, rs in fams.items():
            if not FAMILY_NAME.match(name):
                raise ValueError(f"families.{name}: a family name is snake_case: a-z, 0-9 and _, 2-48 characters")
            if name not in rs.categories and "*" not in rs.categories:
                raise ValueError(f"families.{name}.categories must contain {name!r} (or '*' for the fallback)")
        wild = [n for n, rs in fams.items() if "*" in rs.categories]
        if len(wild) != 1:
            raise ValueError(f"a custom bank needs exactly one fallback family (categories: ['*']), found "
                             f"{len(wild)}{': ' + ', '.join(wild) if wild else ''}")
        return self

    @model_validator(mode="after")
    def _formats_exist(self) -> RubricBank:
        for fam, rs in self.families.items():
            if rs.output_format not in self.output_formats:
                raise ValueError(f"families.{fam}.output_format names {rs.output_format!r}, which is not "
                                 f"in output_formats ({', '.join(self.output_formats)})")
        return self

    @property
    def sha(self) -> str:
        """Content hash: sha256 of the validated bank as canonical JSON (first 16 hex digits). The build
        record is left out, and so are fields added after version 1 while at their defaults, so a
        bank's hash does not change with the package."""
        doc = self.model_dump(mode="json", exclude={"record"})
        if doc["taxonomy"] == "paper":
            del doc["taxonomy"]
        for fam in doc["families"].values():
            if fam["router_description"] is None:
                del fam["router_description"]
        return content_sha(doc)

    @property
    def fallback(self) -> str:
        """The family an unknown category falls back to (categories ['*']; `general` in the paper)."""
        return next((n for n, rs in self.families.items() if "*" in rs.categories), "general")

    @property
    def family_names(self) -> list[str]:
        """The families a router may choose, in bank order."""
        return list(self.families)

    def lookup(self, category: str) -> RubricSet:
        """Top-1 retrieval: the set whose categories contain `category`, else the fallback's."""
        return next((rs for rs in self.families.values() if category in rs.categories), self.families[self.fallback])

    def output_format(self, rs: RubricSet) -> str:
        """The output-format text a rubric set refers to."""
        return self.output_formats[rs.output_format]


@lru_cache(maxsize=8)
def load_cached(path: str) -> RubricBank:
    return load_yaml_model(path, RubricBank)


def load_bank(path: str | Path | None = None) -> RubricBank:
    """Load and validate a bank (default: the bundled one); raises SchemaError naming file and field."""
    return load_cached(str(Path(path or DEFAULT_BANK).resolve()))
