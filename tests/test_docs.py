"""The README and the docs site (docs/, mkdocs.yml) against the package: every `adaptrubric_local` name a
Python example uses is public, the Python examples run on the tiny model and synthetic data, every
`adaptrubric ...` command line in a bash block parses with the real parser (so a renamed flag breaks
this test, not a reader), the command reference is what tools/gen_cli_reference.py prints, and the
Python reference documents every public name. `make docs` builds the site with `mkdocs build --strict`
(broken links and anchors); these tests need no MkDocs."""
from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import io
import os
import re
import shlex
from pathlib import Path

import pytest

import adaptrubric_local

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
# The Python front door comes with the package's public API; until it is there, the examples that use
# it cannot run and its names cannot be checked.
HAS_VERIFIER = hasattr(adaptrubric_local, "Verifier")
NO_VERIFIER = "adaptrubric_local.Verifier is not in this checkout"


NOT_RUN = "<!-- docs-test: not run"  # on the line before a block: its names are checked, it is not run
# package modules that come with this release, in other branches of its work: an example importing one
# runs once it is in the checkout
ARRIVING = ("adaptrubric_local.audit",)


def blocks(lang: str, runnable: bool = False) -> list[tuple[str, int, str]]:
    """(page, line, code) of every fenced block in `lang` in the README and docs/ (`runnable`: leaving
    out the blocks marked NOT_RUN)."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            if m.group(1) == lang and not (runnable and before.startswith(NOT_RUN)):
                out.append((page.relative_to(ROOT).as_posix(), text[:m.start()].count("\n") + 1, m.group(2)))
    return out


PYTHON = blocks("python")
RUNNABLE = blocks("python", runnable=True)
BASH = blocks("bash")


def test_the_pages_have_examples():
    pages = {p for p, _, _ in PYTHON}
    assert {"README.md", "docs/getting-started.md", "docs/rewards.md"} <= pages
    assert len(BASH) >= 20


def package_names(code: str) -> set[str]:
    """The names a Python block takes from adaptrubric_local: `from adaptrubric_local import X` and
    `adaptrubric_local.X`; a submodule import is returned as its dotted path (examples use none)."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "adaptrubric_local":
            if node.module == "adaptrubric_local":
                names.update(a.name for a in node.names)
            else:
                names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("adaptrubric_local."))
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "adaptrubric_local"):
            names.add(node.attr)
    return names


def test_package_names_are_read_from_every_kind_of_use():
    code = ("from adaptrubric_local import A, B\nimport adaptrubric_local\nadaptrubric_local.C\n"
            "from adaptrubric_local.engine.build import build_engine\nimport os\n")
    assert package_names(code) == {"A", "B", "C", "adaptrubric_local.engine.build.build_engine"}
    assert public("RewardModel") and not public("AdaptRubricX")
    assert not public("adaptrubric_local.engine.build.build_engine")  # a module without __all__


def test_a_marked_block_is_checked_but_not_run():
    marked = [(p, n) for p, n, _ in PYTHON if (p, n) not in {(q, m) for q, m, _ in RUNNABLE}]
    assert ("docs/audit.md", next(n for p, n, _ in PYTHON if p == "docs/audit.md")) in marked


def _arriving(module: str) -> bool:
    """Whether `module` comes with this release from another branch and is not in this checkout yet."""
    return module.startswith(ARRIVING) and importlib.util.find_spec(ARRIVING[0]) is None


def public(name: str) -> bool:
    """A top-level name in adaptrubric_local.__all__, or `package.NAME` with NAME in that
    subpackage's own `__all__` (a module without `__all__` exports nothing to the examples)."""
    module, _, attr = name.rpartition(".")
    mod = importlib.import_module(module) if module else adaptrubric_local
    return attr in getattr(mod, "__all__", ()) and getattr(mod, attr, None) is not None


@pytest.mark.parametrize("page,line,code", PYTHON, ids=[f"{p}:{n}" for p, n, _ in PYTHON])
def test_python_examples_use_public_names_only(page, line, code):
    used = package_names(code)
    if any(_arriving(n) for n in used):
        pytest.skip(f"{page}:{line} imports a module of this release not in this checkout")
    not_public = sorted(n for n in used if not public(n))
    if not HAS_VERIFIER and not_public == ["Verifier"]:
        pytest.skip(NO_VERIFIER)
    assert not_public == [], f"{page}:{line} uses names outside the package's public __all__: {not_public}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, tiny_model):
    """A folder holding what the examples name: runs/tiny and runs/synth (labelled synthetic
    trajectories), as `adaptrubric make-tiny-model runs/tiny` and `adaptrubric synth --out runs/synth`
    make them. runs/tiny is the session's tiny model with one change to its generation config: every
    token ends a reply, so each call generates one token instead of a random model's 1,024 (minutes on
    2 cores); what is checked is that the examples run against the public API and return one verdict and
    one reward per trajectory, not what a random model says."""
    import json

    from adaptrubric_local.synth import synthesize

    root = tmp_path_factory.mktemp("examples")
    tiny = root / "runs" / "tiny"
    tiny.mkdir(parents=True)
    for f in Path(tiny_model).iterdir():
        if f.name != "generation_config.json":
            (tiny / f.name).symlink_to(f)
    gen = json.loads((Path(tiny_model) / "generation_config.json").read_text())
    vocab = json.loads((Path(tiny_model) / "config.json").read_text())["text_config"]["vocab_size"]
    (tiny / "generation_config.json").write_text(json.dumps({**gen, "eos_token_id": list(range(vocab))}))
    synthesize(root / "runs" / "synth", n_tasks=2, candidates=2, size=(90, 200))
    return root


@pytest.mark.parametrize("page,line,code", RUNNABLE, ids=[f"{p}:{n}" for p, n, _ in RUNNABLE])
def test_python_examples_run(page, line, code, workdir, monkeypatch):
    """Each Python block as written, in a folder with runs/tiny and runs/synth; what it scored is
    checked: one verdict (and reward) per trajectory, each a real status (and a reward or None)."""
    if "Verifier" in package_names(code) and not HAS_VERIFIER:
        pytest.skip(NO_VERIFIER)
    from adaptrubric_local import load_trajectories

    n = len(load_trajectories(workdir / "runs" / "synth" / "trajectories.jsonl").trajectories)
    monkeypatch.chdir(workdir)
    scope: dict = {"__name__": "__main__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{page}:{line}", "exec"), scope)
    verdicts, rewards = scope.get("verdicts"), scope.get("rewards")
    if verdicts is not None:
        assert len(verdicts) == n and {v.status for v in verdicts} <= {"ok", "unparsed", "error"}
    if isinstance(rewards, list):
        assert len(rewards) == n and all(r in (0.0, 1.0, None) for r in rewards), rewards


def command_lines(code: str) -> list[str]:
    """The `adaptrubric ...` commands of a bash block, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    out = []
    for line in joined.splitlines():
        if re.match(r"\s*(\S*/)?adaptrubric\s", line):
            out.append(shlex.split(line, comments=True))
    return out


def test_command_lines_are_read_as_a_shell_reads_them():
    code = ("adaptrubric score DATA --model M \\\n    --out v.jsonl   # a comment\n"
            ".venv/bin/adaptrubric eval DATA --out 'a b'\npip install adaptrubric-local\n")
    assert command_lines(code) == [["adaptrubric", "score", "DATA", "--model", "M", "--out", "v.jsonl"],
                                   [".venv/bin/adaptrubric", "eval", "DATA", "--out", "a b"]]


COMMANDS = [(page, line, words) for page, line, code in BASH for words in command_lines(code)]


def _regular_cli() -> bool:
    """Whether this checkout's command line takes the spellings the docs use (`bank validate`, DATA
    first for eval/tts/ablate/review/calibrate, `route --out`)."""
    from adaptrubric_local.cli import build_parser

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            build_parser().parse_args(["bank", "validate", "rubric_bank/default.yaml"])
        except SystemExit:
            return False
    return True


@pytest.mark.parametrize("page,line,words", COMMANDS, ids=[f"{p}:{n}:{w[1] if len(w) > 1 else ''}"
                                                          for p, n, w in COMMANDS])
def test_command_lines_parse(page, line, words, monkeypatch):
    """Parsed by the real parser, not run: a flag renamed or removed fails here."""
    from adaptrubric_local.cli import build_parser

    monkeypatch.chdir(ROOT)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            build_parser().parse_args(words[1:])
            code = 0
        except SystemExit as exc:
            code = exc.code
    if code != 0 and not _regular_cli():
        pytest.skip("this checkout's command line predates the spellings the docs use")
    assert code == 0, f"{page}:{line}: {shlex.join(words)}\n{err.getvalue()}"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_cli_reference", ROOT / "tools" / "gen_cli_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_command_reference_is_what_the_parsers_print(monkeypatch):
    gen = _generator()
    monkeypatch.setenv("COLUMNS", "57")  # the page must not depend on the terminal
    text = gen.render()
    assert os.environ["COLUMNS"] == "57"
    assert text == gen.PAGE.read_text(encoding="utf-8"), "docs/reference/cli.md is stale: run " \
        "`python tools/gen_cli_reference.py` and commit it"
    sections = re.findall(r"^##+ `adaptrubric ?([^`]*)`", text, re.M)
    assert {"score", "eval", "serve", "distill collect", "bank induce"} <= set(sections)
    # one heading per command, a subcommand's under its group's: a search hit lands on the command
    assert "### `adaptrubric distill collect`" in text and "## `adaptrubric distill`" in text
    from adaptrubric_local.cli import build_parser

    assert len(sections) == len(set(sections)) == len(list(gen.walk(build_parser())))
    assert gen.main(["--check"]) == 0


def test_the_reference_check_fails_on_a_stale_page(tmp_path, monkeypatch, capsys):
    gen = _generator()
    stale = tmp_path / "cli.md"
    stale.write_text(gen.render().replace("--resume", "--resumed", 1), encoding="utf-8")
    monkeypatch.setattr(gen, "PAGE", stale)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err


def test_the_python_reference_documents_every_public_name():
    text = (ROOT / "docs" / "reference" / "python.md").read_text(encoding="utf-8")
    targets = re.findall(r"^::: (\S+)", text, re.M)
    documented = {t.split(".", 1)[1] for t in targets if t.count(".") == 1}
    missing = sorted(set(adaptrubric_local.__all__) - documented - {"__version__"})
    assert missing == [], f"public names without a `::: adaptrubric_local.NAME` entry: {missing}"
    unknown = []
    for target in targets:
        module, _, name = target.rpartition(".")
        if not hasattr(importlib.import_module(module), name):
            unknown.append(target)
    if unknown and not HAS_VERIFIER:
        pytest.skip(f"{NO_VERIFIER}: {', '.join(unknown)}")
    assert unknown == []


def test_the_readme_and_the_scoring_page_hold_the_same_defaults():
    def table(text):
        lines = text.split("## Defaults are the paper's method", 1)[1].strip().splitlines()
        rows = []
        for line in lines:
            if not line.startswith("|"):
                break
            rows.append(line)
        return rows

    readme = table((ROOT / "README.md").read_text(encoding="utf-8"))
    scoring = table((ROOT / "docs" / "scoring.md").read_text(encoding="utf-8"))
    assert len(readme) >= 10 and readme == scoring


def test_the_readme_fits_a_few_screens_and_its_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert links and [x for x in links if "://" not in x and not (ROOT / x).exists()] == []
    assert "docs/reference/cli.md" in links and "docs/reference/python.md" in links


def test_every_page_is_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert sorted(p for p in pages if f": {p}" not in nav) == []


# The widest code line a page may hold: what a code block shows at 1280 px without scrolling, measured in
# Chromium (tests/test_docs_browser.py asserts it still fits): 118 columns of the monospace font beside the
# navigation, with the page's table of contents in the navigation (mkdocs.yml toc.integrate); 110 leaves a
# margin for a wider font.
CODE_COLUMNS = 110
ANY_FENCE = re.compile(r"^( *)```(\w*)[^\n]*\n(.*?)^\1```", re.S | re.M)
WRAPPED = {"json"}  # one record per line as a JSONL file holds it; wrapped on screen (docs/stylesheets/extra.css)


def wide_code_lines(text: str, columns: int = CODE_COLUMNS) -> list[tuple[int, int]]:
    """(line number, width) of each line of a fenced block (at any indentation, which the page drops)
    wider than `columns`, but for the languages the site wraps (WRAPPED)."""
    out = []
    for m in ANY_FENCE.finditer(text):
        if m.group(2) in WRAPPED:
            continue
        first = text[:m.start()].count("\n") + 2
        for i, line in enumerate(m.group(3).splitlines()):
            shown = line[len(m.group(1)):] if line.startswith(m.group(1)) else line.lstrip()
            if len(shown) > columns:
                out.append((first + i, len(shown)))
    return out


def test_wide_code_lines_are_found_at_any_indentation():
    text = ("* item:\n\n    ```text\n    " + "x" * 111 + "\n    " + "y" * 110 + "\n    ```\n\n"
            "```\n" + "z" * 112 + "\n```\n\n```json\n" + "{}" * 60 + "\n```\n")
    assert wide_code_lines(text) == [(4, 111), (9, 112)]


def test_code_blocks_fit_the_page_at_1280_px():
    wide = [f"{p.relative_to(ROOT).as_posix()}:{n}: {w} columns" for p in sorted((ROOT / "docs").rglob("*.md"))
            for n, w in wide_code_lines(p.read_text(encoding="utf-8"))]
    assert wide == [], f"code lines wider than {CODE_COLUMNS} columns (cut off at 1280 px): {wide}"
    assert _generator().COLUMNS == CODE_COLUMNS


def test_the_reference_breaks_a_long_command_where_a_shell_joins_it_again():
    gen = _generator()
    line = "  adaptrubric score DATA --model Qwen/Qwen3-VL-8B-Instruct --out v.jsonl " + "--votes 3 " * 8 + \
        "--resume   # after a crash"
    lines = gen.fit(line, 60)
    assert lines[0] == "  # after a crash" and all(len(x) <= 60 for x in lines) and len(lines) > 2
    assert shlex.split("\n".join(lines[1:]).replace("\\\n", " ")) == shlex.split(line, comments=True)
    prose = "Score every trajectory in DATA and stream verdict lines to --out as they complete. " * 3
    assert all(len(x) <= gen.WIDTH for x in gen.fit(prose)) and " ".join(gen.fit(prose)) == prose.strip()
    assert gen.fit("  short line") == ["  short line"]


def test_the_site_nav_groups_guide_reference_and_development():
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    groups = {k: v for item in nav for k, v in item.items() if isinstance(v, list)}
    assert list(groups) == ["Guide", "Reference", "Development"]
    pages = {k: {p for e in v for p in e.values()} for k, v in groups.items()}
    assert {"getting-started.md", "scoring.md", "engines.md", "evaluation.md"} <= pages["Guide"]
    assert pages["Reference"] == {"reference/cli.md", "reference/python.md"}
    assert pages["Development"] == {"architecture.md", "mutation.md"}


def test_the_answering_models_build_line_is_quoted_as_it_prints():
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    quoted = re.search(r"`(answering tiny model: [^`]*)`", " ".join(text.split()))
    assert quoted, "getting-started.md quotes the line the answering model's build prints"
    assert re.fullmatch(r"answering tiny model: held-out agreement \d\.\d{3}, unparsed \d+, \.\.\.", quoted.group(1))
    source = (ROOT / "adaptrubric_local" / "distill" / "answering.py").read_text(encoding="utf-8")
    assert 'log(f"answering tiny model: held-out agreement {' in source and '}, unparsed "' in source
    assert "every verdict parsed" not in " ".join(text.split())
