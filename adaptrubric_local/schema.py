"""Strict loading of YAML data files into pydantic models, with errors that name file and field.

Shared by the rubric bank and the prompt set. Knows nothing about what either contains.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """A frozen schema that refuses keys it does not name."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SchemaError(ValueError):
    """A data file that does not match its schema; the message names the file and each field."""


def load_yaml_model(path: str | Path, model: type[M]) -> M:
    """Read `path` as YAML and validate it into `model`, or raise SchemaError."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise SchemaError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise SchemaError(f"{path}: expected a mapping at the top level, got {type(doc).__name__}")
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            msg = "unknown key (not in the schema)" if err["type"] == "extra_forbidden" else err["msg"]
            lines.append(f"{path}: field '{where}': {msg}")
        raise SchemaError("\n".join(lines)) from None


def content_sha(doc: Any) -> str:
    """The first 16 hex digits of the sha256 of `doc` as canonical JSON (sorted keys, UTF-8)."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def json_problem(exc: json.JSONDecodeError, line: bool = False) -> str:
    """A JSON parse error as one phrase: 'Unterminated string starting at column 5' (json's messages
    that end in "at" already point at the position), with the line too when `line`."""
    where = f"line {exc.lineno}, column {exc.colno}" if line else f"column {exc.colno}"
    return f"{exc.msg} {where}" if exc.msg.endswith(" at") else f"{exc.msg} at {where}"


def json_lines(lines: Iterable[str], path, error: type[Exception] = ValueError) -> Iterator[tuple[int, Any]]:
    """(line number, object) for each non-blank line of a JSONL file (`lines`: its lines, `path`: its
    name in messages); a line that is not JSON raises `error` naming the file and the line."""
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{path}: line {n}: malformed JSON ({json_problem(exc)})") from None
        yield n, obj
