"""The rules router's lexicon: loading `data/router_lexicon.yaml` into a strict schema, and the
immutable `Lexicon` the rules read (verb families, verb classes, word-class patterns).

A `Lexicon` is a value: the rules take it as an argument, and `without(verbs)` returns a new one
(for leave-one-source-out estimates, eval/router_accuracy.py), so routing with two lexicons at once
(in two threads) is safe. Knows nothing about clauses or how the words are used.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..schema import load_yaml_model
from ..types import FAMILIES

DEFAULT_LEXICON = Path(__file__).resolve().parents[1] / "data" / "router_lexicon.yaml"

_Words = list[str]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _compiles(fragments: list[str]) -> list[str]:
    for n, frag in enumerate(fragments):
        try:
            re.compile(frag)
        except re.error as exc:
            raise ValueError(f"item {n} ({frag!r}) is not a regular expression: {exc}") from None
    return fragments


class WordClasses(_Strict):
    """Word classes as regular-expression alternatives (joined in order, matched case-insensitively)."""

    setting: _Words = Field(min_length=1)
    place: _Words = Field(min_length=1)
    position: _Words = Field(min_length=1)
    data_object: _Words = Field(min_length=1)
    text_edit: _Words = Field(min_length=1)
    file_extension: _Words = Field(min_length=1)
    chart: _Words = Field(min_length=1)
    message_item: _Words = Field(min_length=1)
    cart: _Words = Field(min_length=1)
    pronoun: _Words = Field(min_length=1)
    refers_to_answer: _Words = Field(min_length=1)
    behaviour_verb: _Words = Field(min_length=1)

    @field_validator("*")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        return _compiles(v)


class LexiconFile(_Strict):
    """The schema of a lexicon file (see data/router_lexicon.yaml for what each field is for)."""

    version: int
    verbs: dict[str, _Words]
    step_verbs: _Words = Field(min_length=1)
    item_only_verbs: _Words = Field(min_length=1)
    answer_verbs: _Words = Field(min_length=1)
    purchase_verbs: _Words = Field(min_length=1)
    stop_words: _Words = Field(min_length=1)
    kind_nouns: _Words = Field(min_length=1)
    words: WordClasses

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


def _any(fragments: Iterable[str]) -> str:
    return "(?:" + "|".join(fragments) + ")"


def _word_pattern(fragments: Iterable[str]) -> re.Pattern:
    return re.compile(rf"\b{_any(fragments)}\b", re.I)


@dataclass(frozen=True)
class Lexicon:
    """What the rules router knows about words. Immutable: `without` makes a new one."""

    verbs: Mapping[str, str]  # head verb (or phrase) -> family
    step_verbs: frozenset[str]
    item_only_verbs: frozenset[str]
    answer_verbs: frozenset[str]
    purchase_verbs: frozenset[str]
    stop_words: frozenset[str]
    kind_nouns: frozenset[str]
    words: WordClasses
    verb_keys: tuple[str, ...] = field(init=False)  # head verbs, longest first (phrases before their first word)
    setting: re.Pattern = field(init=False)
    place: re.Pattern = field(init=False)
    position: re.Pattern = field(init=False)
    data_object: re.Pattern = field(init=False)
    text_edit: re.Pattern = field(init=False)
    file_object: re.Pattern = field(init=False)
    chart: re.Pattern = field(init=False)
    message_item: re.Pattern = field(init=False)
    cart: re.Pattern = field(init=False)
    pronoun: re.Pattern = field(init=False)
    refers_to_answer: re.Pattern = field(init=False)
    behaviour: re.Pattern = field(init=False)

    def __post_init__(self):
        w = self.words
        derived = {
            "verbs": MappingProxyType(dict(self.verbs)),
            "verb_keys": tuple(sorted(self.verbs, key=len, reverse=True)),
            "setting": _word_pattern(w.setting),
            "place": re.compile(rf"\b(?:to|into|in|onto|under)\s+(?:the\s+|my\s+|a\s+(?:new\s+)?)?"
                                rf"(?:[\w.'-]+\s+){{0,3}}?{_any(w.place)}\b|\b(?:to|into|in|under)\s+(?:~|/|[a-z]:\\)",
                                re.I),
            "position": re.compile(rf"\b(?:to|at)\s+(?:the\s+)?{_any(w.position)}\b", re.I),
            "data_object": _word_pattern(w.data_object),
            "text_edit": _word_pattern(w.text_edit),
            "file_object": re.compile(rf"\.{_any(w.file_extension)}\b", re.I),
            "chart": _word_pattern(w.chart),
            "message_item": _word_pattern(w.message_item),
            "cart": _word_pattern(w.cart),
            "pronoun": _word_pattern(w.pronoun),
            "refers_to_answer": _word_pattern(w.refers_to_answer),
            # "set/configure <app> to <verb>" and "make <App> <verb>": how an app behaves from now on
            "behaviour": re.compile(rf"^(?:set|configure|make)\s+(?:the\s+|my\s+)?(?:[\w.-]+\s+){{0,3}}?(?:to\s+)?"
                                    rf"{_any(w.behaviour_verb)}\b", re.I),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_file(cls, doc: LexiconFile) -> Lexicon:
        verbs = {verb: fam for fam, vs in doc.verbs.items() for verb in vs}
        return cls(verbs=verbs, step_verbs=frozenset(doc.step_verbs), item_only_verbs=frozenset(doc.item_only_verbs),
                   answer_verbs=frozenset(doc.answer_verbs), purchase_verbs=frozenset(doc.purchase_verbs),
                   stop_words=frozenset(doc.stop_words), kind_nouns=frozenset(doc.kind_nouns), words=doc.words)

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
