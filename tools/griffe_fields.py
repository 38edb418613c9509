"""A griffe extension for the Python reference (mkdocs.yml loads it): a dataclass field is shown with its
help text and its real default.

The package's settings are dataclasses whose fields carry their help text in `field(metadata={"help":
...})` (the command line's flags are generated from it, cli/flags.py), and a few defaults are names or
factories (`field(default=DEFAULT_BUDGET)`, `field(default_factory=lambda: ...)`). Read from the source
alone, the reference would show those expressions and no descriptions. It imports the package (which
loads no model code) and, for each dataclass in a module that import loaded (every class the reference
shows), per field:

- the attribute's value, and the default of the `__init__` parameter griffe makes for it, become the
  default's repr (`max_images: int = 10`), or for a factory the expression it evaluates
  (`max(1, os.cpu_count() or 1)`) or the value a class gives (`list` -> `[]`);
- the attribute's docstring, where it has none, becomes its help text, with what None means
  (`metadata["none"]`) when the default is None.

A class whose docstring is completed when the package is imported (Verifier's and RewardModel's `Args:`
take the engine keywords from verifier.KEYWORDS, written once) is shown with the docstring Python gives it.

It knows nothing of MkDocs; a class outside the modules the package imports is left as griffe read it
(importing those would load torch and the training stack for nothing).
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
from typing import Any

import griffe


def _factory_default(field: dataclasses.Field, source: Any) -> str:
    """What a `default_factory` gives, in words a reader can check: a lambda's body as written, else
    the value the factory makes."""
    lam = source.arguments if isinstance(source, griffe.ExprCall) else None
    for arg in lam or ():
        value = getattr(arg, "value", None)
        if getattr(arg, "name", None) == "default_factory" and isinstance(value, griffe.ExprLambda):
            return str(value.body)
    return repr(field.default_factory())


def _help(field: dataclasses.Field) -> str:
    text = str(field.metadata.get("help", "")).strip()
    if text and field.default is None and field.metadata.get("none"):
        text += f" (None: {field.metadata['none']})"
    return text


def document_fields(cls: griffe.Class) -> int:
    """Set the defaults and descriptions of `cls`'s fields from the class itself; how many it changed."""
    runtime = getattr(sys.modules.get(cls.module.path), cls.name, None)
    if runtime is None or not dataclasses.is_dataclass(runtime):
        return 0
    init = cls.members.get("__init__")
    params = {p.name: p for p in init.parameters} if isinstance(init, griffe.Function) else {}
    changed = 0
    for field in dataclasses.fields(runtime):
        attr = cls.members.get(field.name)
        if not isinstance(attr, griffe.Attribute) or attr.is_alias:
            continue
        if field.default is not dataclasses.MISSING:
            default = repr(field.default)
        elif field.default_factory is not dataclasses.MISSING:
            default = _factory_default(field, attr.value)
        else:
            default = None
        if default is not None:
            attr.value = default
            if field.name in params:
                params[field.name].default = default
        text = _help(field)
        if text and attr.docstring is None:
            attr.docstring = griffe.Docstring(text, parent=attr)
            if field.name in params and params[field.name].docstring is None:
                params[field.name].docstring = griffe.Docstring(text, parent=attr)
        changed += 1
    return changed


def runtime_docstring(cls: griffe.Class) -> bool:
    """Give `cls` its docstring as Python has it after import, where that differs from the source's;
    whether it did."""
    runtime = getattr(sys.modules.get(cls.module.path), cls.name, None)
    doc = inspect.cleandoc(runtime.__doc__) if getattr(runtime, "__doc__", None) else None
    if doc is None or cls.docstring is None or cls.docstring.value == doc:
        return False
    cls.docstring = griffe.Docstring(doc, lineno=cls.docstring.lineno, endlineno=cls.docstring.endlineno,
                                     parent=cls)
    return True


def _classes(obj: griffe.Object):
    for member in obj.members.values():
        if member.is_alias:
            continue
        if member.is_class:
            yield member
            yield from _classes(member)
        elif member.is_module:
            yield from _classes(member)


class FieldHelp(griffe.Extension):
    """After the package is loaded: every dataclass's fields get their real defaults and help text."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        importlib.import_module(pkg.path)
        for cls in _classes(pkg):
            runtime_docstring(cls)
            if any("dataclass" in str(d.value) for d in cls.decorators):
                document_fields(cls)
