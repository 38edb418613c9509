"""The rules router's lexicon: `data/router_lexicon.yaml` loaded into a strict schema, and the immutable
`Lexicon` the rules take as an argument (`without(verbs)` returns a new one, so two lexicons may route
at once). Knows nothing about clauses or how the words are used.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, field_validator

from ..schema import load_yaml_model
from ..types import FAMILIES

DEFAULT_LEXICON = Path(__file__).resolve().parents[1] / "data" / "router_lexicon.yaml"

WORD_LISTS = ("step_verbs", "item_only_verbs", "answer_verbs", "purchase_verbs", "stop_words", "kind_nouns")
WORD_CLASSES = ("setting", "place", "position", "data_object", "text_edit", "file_extension", "chart", "message_item",
                "cart", "pronoun", "refers_to_answer", "behaviour_verb")
_PLAIN_WORDS = ("setting", "data_object", "text_edit", "chart", "message_item", "cart", "pronoun", "refers_to_answer")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _compiles(fragments: list[str]) -> list[str]:
    for n, frag in enumerate(fragments):
        try:
            re.compile(frag)
        except re.error as exc:
            raise ValueError(f"item {n} ({frag!r}) is not a regular expression: {exc}") from None
    return fragments


_Words = Annotated[list[str], Field(min_length=1)]
_Patterns = Annotated[list[str], Field(min_length=1), AfterValidator(_compiles)]

WordClasses = create_model(
    "WordClasses", __base__=_Strict, __module__=__name__,
    __doc__="Word classes as regular-expression alternatives (joined in order, matched case-insensitively).",
    **{name: (_Patterns, ...) for name in WORD_CLASSES})


class _LexiconHead(_Strict):
    version: int
    verbs: dict[str, list[str]]

    @field_validator("verbs")
    @classmethod
    def _families(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        unknown = sorted(set(v) - set(FAMILIES))
        if unknown:
            raise ValueError(f"{unknown} are not families (known: {', '.join(FAMILIES)})")
        seen: dict[str, str] = {}
        for fam, verbs in v.items():
            for verb in verbs:
                if not verb or verb != verb.lower().strip():
                    raise ValueError(f"{fam}: {verb!r} must be lower case without outer spaces")
                if verb in seen:
                    raise ValueError(f"{verb!r} is listed under both {seen[verb]} and {fam}")
                seen[verb] = fam
        return v


LexiconFile = create_model(
    "LexiconFile", __base__=_LexiconHead, __module__=__name__,
    __doc__="The schema of a lexicon file (see data/router_lexicon.yaml for what each field is for).",
    **{name: (_Words, ...) for name in WORD_LISTS}, words=(WordClasses, ...))


def _any(fragments: Iterable[str]) -> str:
    return "(?:" + "|".join(fragments) + ")"


@dataclass(frozen=True)
class Lexicon:
    """What the rules router knows about words. Immutable: `without` makes a new one. The WORD_LISTS
    (frozensets) and the patterns (`setting`, `place`, ..., `file_object`, `behaviour`) read as attributes."""

    verbs: Mapping[str, str]  # head verb (or phrase) -> family
    lists: Mapping[str, frozenset[str]]  # WORD_LISTS by name
    words: WordClasses
    verb_keys: tuple[str, ...] = field(init=False)  # head verbs, longest first (phrases before their first word)
    patterns: Mapping[str, re.Pattern] = field(init=False)

    def __post_init__(self):
        w = self.words
        patterns = {name: re.compile(rf"\b{_any(getattr(w, name))}\b", re.I) for name in _PLAIN_WORDS}
        patterns.update({
            "place": re.compile(rf"\b(?:to|into|in|onto|under)\s+(?:the\s+|my\s+|a\s+(?:new\s+)?)?"
                                rf"(?:[\w.'-]+\s+){{0,3}}?{_any(w.place)}\b|\b(?:to|into|in|under)\s+(?:~|/|[a-z]:\\)",
                                re.I),
            "position": re.compile(rf"\b(?:to|at)\s+(?:the\s+)?{_any(w.position)}\b", re.I),
            "file_object": re.compile(rf"\.{_any(w.file_extension)}\b", re.I),
            # "set/configure <app> to <verb>" and "make <App> <verb>": how an app behaves from now on
            "behaviour": re.compile(rf"^(?:set|configure|make)\s+(?:the\s+|my\s+)?(?:[\w.-]+\s+){{0,3}}?(?:to\s+)?"
                                    rf"{_any(w.behaviour_verb)}\b", re.I),
        })
        object.__setattr__(self, "verbs", MappingProxyType(dict(self.verbs)))
        object.__setattr__(self, "lists", MappingProxyType(dict(self.lists)))
        object.__setattr__(self, "verb_keys", tuple(sorted(self.verbs, key=len, reverse=True)))
        object.__setattr__(self, "patterns", MappingProxyType(patterns))

    def __getattr__(self, name: str):  # only called for what is not a field: a word list or a pattern
        for table in (self.__dict__.get("lists", {}), self.__dict__.get("patterns", {})):
            if name in table:
                return table[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def from_file(cls, doc: LexiconFile) -> Lexicon:
        verbs = {verb: fam for fam, vs in doc.verbs.items() for verb in vs}
        return cls(verbs=verbs, lists={name: frozenset(getattr(doc, name)) for name in WORD_LISTS}, words=doc.words)

    def without(self, verbs: Iterable[str]) -> Lexicon:
        """This lexicon with the head verbs `verbs` removed (verbs it does not have are ignored)."""
        drop = set(verbs)
        return replace(self, verbs={v: f for v, f in self.verbs.items() if v not in drop})


@lru_cache(maxsize=8)
def _load_cached(path: str) -> Lexicon:
    return Lexicon.from_file(load_yaml_model(path, LexiconFile))


def load_lexicon(path: str | Path | None = None) -> Lexicon:
    """Load and check a lexicon file (default: the bundled data/router_lexicon.yaml); cached per path."""
    return _load_cached(str(Path(path or DEFAULT_LEXICON).resolve()))
