"""Strict loading of YAML data files into pydantic models, with errors that name file and field.

Shared by the rubric bank and the prompt set. Knows nothing about what either contains.
"""
from __future__ import annotations

from pathlib import Path
from typing import Type, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class SchemaError(ValueError):
    """A data file that does not match its schema; the message names the file and each field."""


def load_yaml_model(path: str | Path, model: Type[M]) -> M:
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
