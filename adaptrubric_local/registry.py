"""What the package's extension points share: `Registry`, a name -> entry table for engines
(engine/options.py), data formats (formats/__init__.py) and perturbations (audit/perturbations.py),
each registered with `Registry.register`, and `load_plugins`, which imports a user's Python file or
module so that its registration lines run (`--plugins FILE.py|MODULE` on the command line, read
before the parser is built). Knows nothing about what the entries are.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

PLUGINS_FLAG = "--plugins"
PLUGINS_HELP = ("a Python file or module to import first, repeatable: its @register_engine, @register_format and "
                "@perturbation lines add engines (--engine), data formats (--format) and perturbations (audit)")


class Registry(dict[str, T]):
    """Entries by name, in registration order, each made by `entry(name, function, **fields)` from the
    function `register` decorates: a name already there is refused (unless `replace`), `lookup` names
    the registered ones when a name is not."""

    def __init__(self, kind: str, entry: Callable[..., T]):
        super().__init__()
        self.kind, self.entry = kind, entry

    def register(self, name: str, *, replace: bool = False, **fields: Any) -> Callable[[F], F]:
        """Decorator: register the function below as `name`, its entry `entry(name, function, **fields)`;
        a name already registered is a ValueError unless `replace`. Returns the function unchanged."""
        def wrap(function: F) -> F:
            if name in self and not replace:
                raise ValueError(f"a {self.kind} named {name!r} is already registered")
            self[name] = self.entry(name, function, **fields)
            return function
        return wrap

    def lookup(self, name: str) -> T:
        """The entry `name`, or a ValueError naming the registered ones and how to add more."""
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}; registered: {', '.join(self)} (a Python file given "
                             f"with {PLUGINS_FLAG} FILE.py registers more)")
        return self[name]


def load_plugins(sources: Iterable[str], flag: str = PLUGINS_FLAG) -> None:
    """Import each Python file (`*.py`) or module named in `sources`, once per process; a file or module
    that is not there is a ValueError naming `flag` and it."""
    for src in sources:
        path = Path(src)
        if path.suffix == ".py":
            if not path.is_file():
                raise ValueError(f"{flag} {src}: no such file")
            name = f"adaptrubric_plugin_{path.stem}_{abs(hash(str(path.resolve())))}"
            if name in sys.modules:
                continue
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            try:
                spec.loader.exec_module(mod)
            except BaseException:
                del sys.modules[name]
                raise
        else:
            try:
                importlib.import_module(src)
            except ModuleNotFoundError as exc:
                raise ValueError(f"{flag} {src}: {exc}") from None


def plugins_in(argv: list[str]) -> list[str]:
    """The values of `--plugins` in a command line, before it is parsed."""
    out = []
    for k, arg in enumerate(argv):
        if arg == PLUGINS_FLAG and k + 1 < len(argv):
            out.append(argv[k + 1])
        elif arg.startswith(PLUGINS_FLAG + "="):
            out.append(arg.split("=", 1)[1])
    return out
