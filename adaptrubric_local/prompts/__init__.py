"""Prompt templates as data (paper Appendix H.2-H.3) and a renderer that fails loudly.

The set holds the paper's four prompts (router, verifier skeleton, fine-cue prompt, cue block), the
router prompt in parts for banks of their own (`router_bank`), and the two ablation variants of
Table 4; default.yaml lists every way the bundled text differs from the paper. `render` raises
TemplateError for any placeholder left unfilled. Knows nothing about rubrics or trajectories.
"""
from __future__ import annotations

import string
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, create_model

from ..schema import Strict, content_sha, load_yaml_model

DEFAULT_PROMPTS = Path(__file__).parent / "default.yaml"
M = TypeVar("M", bound=BaseModel)


class TemplateError(KeyError):
    """A template placeholder that was not given a value, or a malformed template."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


class Headings(Strict):
    """Headings printed above each rubric section in the verifier prompt."""

    verification_steps: str
    common_pitfalls: str
    special_rules: str
    meta_rule: str


class PromptFile(Strict):
    """What every prompt file has besides its templates: a version and where its text comes from."""

    version: int
    source: str | None = None


def prompt_schema(name: str, module: str, doc: str, base: type[PromptFile], templates: dict[str, set[str]]):
    """The schema `name` of a prompt file: `base`'s fields and one required text per key of `templates`
    (a template's name -> its placeholders, which `load_prompt_file` checks)."""
    return create_model(name, __base__=base, __module__=module, __doc__=doc, **{k: (str, ...) for k in templates})


REQUIRED_PLACEHOLDERS = {
    "router": {"instruction"},
    "verifier": {"instruction", "agent_answer", "typed_texts", "key_actions", "action_trace",
                 "verification_steps", "common_pitfalls", "special_rules", "additional_attention",
                 "output_format"},
    "fine_cue": {"instruction", "category", "rubric_items_block"},
    "cue_block": {"cue_bullets"},
    "cue_block_no_meta": {"cue_bullets"},
    "verifier_image_only": {"instruction", "output_format"},
    "router_bank": {"instruction", "n_families", "category_lines", "decision_rules", "category_choices"},
}


class _PromptSetFields(PromptFile):
    router_descriptions: dict[str, str]
    router_rules: list[str]
    headings: Headings

    @property
    def sha(self) -> str:
        """Content hash of the prompt set (16 hex digits): the one `prompts_sha` that verdict files,
        distillation manifests and model cards record."""
        return content_sha(self.model_dump(mode="json"))


PromptSet = prompt_schema("PromptSet", __name__, "The four prompts of the method, the two ablation variants, and "
                          "section headings.", _PromptSetFields, REQUIRED_PLACEHOLDERS)


def placeholders(template: str) -> set[str]:
    """The placeholder names used in a template."""
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise TemplateError(f"malformed template: {exc}") from None


def render(template: str, name: str = "template", **values: str) -> str:
    """Fill every placeholder of `template`; raise TemplateError naming any that has no value."""
    missing = sorted(p for p in placeholders(template) if p not in values)
    if missing:
        raise TemplateError(f"{name}: no value for placeholder(s) {', '.join('{' + m + '}' for m in missing)}")
    bad = sorted(p for p in placeholders(template) if not p.isidentifier())
    if bad:
        raise TemplateError(f"{name}: placeholder(s) {bad} are not plain names")
    return template.format(**values)


def load_prompt_file(path: str, schema: type[M], templates: dict[str, set[str]]) -> M:
    """A prompt file in its schema, each template with exactly the placeholders `templates` gives it
    (TemplateError naming the file and field otherwise)."""
    ps = load_yaml_model(path, schema)
    for key, needed in templates.items():
        have = placeholders(getattr(ps, key))
        if have != needed:
            raise TemplateError(f"{path}: field '{key}': placeholders {sorted(have)} must be exactly {sorted(needed)}")
    return ps


@lru_cache(maxsize=8)
def _load_cached(path: str) -> PromptSet:
    ps = load_prompt_file(path, PromptSet, REQUIRED_PLACEHOLDERS)
    for n, rule in enumerate(ps.router_rules):
        if not placeholders(rule) <= {"fallback"}:
            raise TemplateError(f"{path}: field 'router_rules.{n}': the only placeholder allowed is {{fallback}}")
    return ps


def load_prompts(path: str | Path | None = None) -> PromptSet:
    """Load and check a prompt set (default: the bundled one)."""
    return _load_cached(str(Path(path or DEFAULT_PROMPTS).resolve()))
