"""The package's import graph, built from the source with `ast`: no import cycle, and no module imports
the package facade (`adaptrubric_local/__init__`). The layers themselves are import-linter contracts in
pyproject.toml, checked by `lint-imports` in `make test`.

What counts as an edge A -> B: every `import` / `from ... import` statement in A's source that names a
module of the package, wherever it stands: at module level, inside functions and methods (the lazy
imports that keep start-up fast), under `if TYPE_CHECKING:` and in `if __name__ == "__main__":` blocks.
Relative imports are resolved; `from pkg import name` is an edge to the module `pkg.name` when that is a
module, else to `pkg`. Not counted: the import of a parent package that Python performs before a
submodule (`import a.b.c` runs `a/__init__` and `a/b/__init__`): a package `__init__` that re-exports its
own submodules would otherwise always be a cycle with them.
"""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "adaptrubric_local"
ROOT = "adaptrubric_local"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported(module: str, path: Path, node: ast.AST, known: dict) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            anchor = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            anchor = anchor[:len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([node.module] if node.module else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out = []
    for name in names:
        if name != ROOT and not name.startswith(ROOT + "."):
            continue
        while name not in known:  # `import adaptrubric_local.route.rules.x` names an attribute, not a module
            name = name.rsplit(".", 1)[0]
        out.append(name)
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (see the module docstring for what counts)."""
    known = _modules()
    graph = {m: set() for m in known}
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module].update(m for m in _imported(module, path, node, known) if m != module)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as [a, b, ..., a], or [] when there is none (depth-first search)."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                return [*stack[stack.index(n):], n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        state[m] = "done"
        stack.pop()
        return []

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return []


def test_the_graph_sees_the_imports_it_should():
    g = import_graph()
    assert "adaptrubric_local.route.rules" in g["adaptrubric_local.route"]  # package re-export, relative
    assert "adaptrubric_local.engine.hf" in g["adaptrubric_local.engine.build"]  # an import inside a function
    assert "adaptrubric_local.evaluation.metrics" in g["adaptrubric_local.evaluation.harness"]  # from . import x
    assert "adaptrubric_local.pipeline" in g["adaptrubric_local"]  # the facade


def test_find_cycle_finds_a_cycle_through_a_function_level_import():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(g) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    assert find_cycle(import_graph()) == []


def test_no_module_imports_the_package_facade():
    """Modules import what they use from its own module (e.g. `_version`), never from `adaptrubric_local`
    itself, which imports most of the package."""
    importers = {m for m, deps in import_graph().items() if ROOT in deps}
    assert importers == set()


def test_the_facade_exports_what_it_lists():
    import adaptrubric_local as pkg

    assert all(getattr(pkg, name, None) is not None for name in pkg.__all__)
    from adaptrubric_local.dry_run import FakeEngine
    from adaptrubric_local.pipeline import AdaptRubric

    assert (pkg.FakeEngine, pkg.AdaptRubric) == (FakeEngine, AdaptRubric)


def _top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def test_every_name_in_an_all_is_defined():
    """`__all__` names only what its module defines or imports (a deleted function left in a package's
    `__all__` breaks `from package import *` and the reference docs)."""
    missing = []
    for module, path in sorted(_modules().items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                listed = {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
                missing += [f"{module}.{n}" for n in sorted(listed - _top_level_names(tree))]
    assert missing == []
