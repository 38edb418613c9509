"""Every module of the package has a test file a newcomer finds by name, and no test file is named after
how its tests were found (mutation testing: that history is docs/mutation.md).

By name: `pkg/mod.py` -> tests/test_pkg_mod.py, test_mod.py or test_pkg.py; a top-level `mod.py` ->
test_mod.py; a package's `__init__.py` -> test_pkg.py or any test_pkg_*.py. OTHER lists the few modules
whose tests live in a file named otherwise, and says why.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "adaptrubric_local"

OTHER = {
    "__init__.py": "test_import_graph.py",  # the package facade: its exports
    "_version.py": "test_cli.py",  # `adaptrubric --version` and the installed distribution's version
    "engine/openai_engine.py": "test_distill_collect.py",  # against an OpenAI-compatible stub server
    "route/clause.py": "test_route_rules.py",  # clauses are read through explain_rules
    "evaluation/probability.py": "test_calibration.py",  # AUROC/AUPRC/Brier/ECE, hand-checked beside calibration
    "evaluation/review_page.py": "test_review.py",  # the page's files, with the cards they show
    "run_settings.py": "test_scoring.py",  # the settings record and the resume check, beside the writer that keeps them
}


def candidates(rel: Path) -> set[str]:
    """Test file names that would name `rel` (a path inside the package)."""
    if rel.name == "__init__.py":  # a package's __init__
        pkg = "_".join(rel.parent.parts)
        return {f"test_{pkg}.py", f"test_{pkg}_*"}
    parts = [p.lstrip("_") for p in rel.with_suffix("").parts]
    names = {f"test_{'_'.join(parts)}.py", f"test_{parts[-1]}.py"}
    if len(parts) > 1:
        names.add(f"test_{parts[0]}.py")
    return names


def _found(names: set[str], tests: set[str]) -> bool:
    return any(n in tests or (n.endswith("*") and any(t.startswith(n[:-1]) for t in tests)) for n in names)


def test_every_module_has_a_test_file_by_name():
    tests = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    missing = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.as_posix() in OTHER:
            assert OTHER[rel.as_posix()] in tests, rel
            continue
        if not _found(candidates(rel), tests):
            missing.append(f"{rel}: none of {sorted(candidates(rel))}")
    assert not missing, "modules without a test file named after them:\n" + "\n".join(missing)


def test_the_exceptions_are_still_needed():
    """An entry of OTHER whose module now has a file by name (or is gone) should be dropped."""
    tests = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    for rel, _ in OTHER.items():
        assert (PKG / rel).is_file(), f"{rel} no longer exists"
        if rel != "__init__.py":
            assert not _found(candidates(Path(rel)), tests), f"{rel} has a test file by name now"


def test_no_test_file_is_named_after_mutation_testing():
    assert not sorted(p.name for p in (ROOT / "tests").glob("*mutation*"))


def test_the_mutation_runs_deselect_tests_that_exist():
    """pyproject's [tool.mutmut] names tests to leave out of mutation runs: each must still exist."""
    import ast
    import re

    text = (ROOT / "pyproject.toml").read_text()
    ids = re.findall(r'"--deselect=(tests/[\w/]+\.py)::(\w+)"', text)
    assert len(ids) == text.count("--deselect=") and ids
    for file, name in ids:
        path = ROOT / file
        assert path.is_file(), file
        defined = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
        assert name in defined, f"{file}::{name}"
