"""The BUILT documentation site: every page shows what its markdown says (tools/check_site.py over the
HTML MkDocs writes), and the Python reference shows what the code documents. `mkdocs build --strict`
passes over a list that became one paragraph of literal `*` markers or a paragraph that starts
mid-sentence; these checks do not.

The site is built once per session into a temporary folder with the docs extra (`pip install -e
'.[docs]'`); without MkDocs these tests skip (`make docs` runs the same checker over site/, so CI
checks it either way). The checker's own tests render markdown with Python-Markdown and the site's
extensions (Python-Markdown comes with MkDocs)."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTENSIONS = ["admonition", "attr_list", "tables", "toc", "pymdownx.superfences", "pymdownx.highlight"]


def _checker():
    spec = importlib.util.spec_from_file_location("check_site", ROOT / "tools" / "check_site.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_site"] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _render(md: str) -> str:
    markdown = pytest.importorskip("markdown", reason="Python-Markdown comes with the docs extra")
    return f"<article>{markdown.markdown(md, extensions=EXTENSIONS)}</article>"


# What the pages held when issue 35 was filed, cut down to the pattern (the fixed form renders clean).
BROKEN = {
    "a paragraph after a block in an item, then the next item": (
        "* First:\n\n    ```text\n    $ adaptrubric score\n    ```\n\n    The same holds.\n* What reaches vLLM.\n"
        "* Greedy by default.\n", "a list rendered as a paragraph"),
    "a code block indented 2 spaces in an item": (
        "* Read without it:\n\n  ```text\n  adaptrubric: error\n  ```\n* **Which cards first**\n",
        "a list rendered as a paragraph"),
    "a code block indented 2 spaces, blank lines around it": (
        "* It refuses:\n\n  ```text\n  --resume: other settings\n  ```\n\n* Ctrl-C stops a run.\n",
        "a list broken by a code block"),
    "a paragraph whose first line was lost": (
        "The pins.\n\n(`reward.reward_model.enable_resource_pool=True`), the agent loop streams.\n",
        "a paragraph that starts mid-sentence"),
    "a lower-case continuation": ("The agent loop streams each rollout\n\nto a reward worker.\n",
                                  "a paragraph that starts mid-sentence"),
}
FIXED = [
    "* First:\n\n    ```text\n    $ adaptrubric score\n    ```\n\n    The same holds.\n\n* What reaches vLLM.\n",
    "* It refuses:\n\n    ```text\n    --resume: other settings\n    ```\n\n* Ctrl-C stops a run.\n",
    "**verl's routes.** With the defaults\n(`reward.reward_model.enable_resource_pool=True`), the loop.\n",
    "`--resume` skips ids already in the output.\n\n| a | b |\n| --- | --- |\n| x | y |\n",
]


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_checker_finds_markdown_that_did_not_render(name):
    md, problem = BROKEN[name]
    found = _checker().problems_in(_render(md))
    assert any(problem in p for p in found), (name, found)


@pytest.mark.parametrize("md", FIXED, ids=range(len(FIXED)))
def test_the_checker_passes_markdown_that_rendered(md):
    assert _checker().problems_in(_render(md)) == []


def test_the_checker_reads_prose_only():
    """Not the navigation, not code, not the Python reference's docstrings (help texts are lower-case)."""
    page = ("<nav><p>* not the page</p></nav><article><p><code>-x</code> is a flag</p><pre>* a</pre>"
            "<ul><li class='doc-section-item'><div><p>transformers' device_map</p></div></li></ul>"
            "<div class='doc-contents'><p>token cap for router outputs</p></div></article>")
    assert _checker().problems_in(page) == []


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The site as `make docs` builds it (strict), in a temporary folder."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("MkDocs is not installed (pip install -e '.[docs]'); `make docs` checks the site")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_every_page_of_the_built_site_renders_its_markdown(site):
    problems = _checker().check(site)
    assert problems == [], "\n".join(problems)


def test_make_docs_runs_the_checker():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    docs = re.search(r"^docs:.*?(?=^\S|\Z)", makefile, re.S | re.M).group(0)
    assert "tools/check_site.py site" in docs


def _text(html: str) -> str:
    import html as html_text

    return " ".join(html_text.unescape(re.sub(r"<[^>]+>", "", html)).split())


def test_the_python_reference_shows_real_defaults_and_each_fields_help(site):
    """Not `max_images: int = DEFAULT_BUDGET` or a lambda: the value; and PipelineConfig's fields with
    the help text their metadata carries (tools/griffe_fields.py)."""
    import dataclasses

    from adaptrubric_local import HFEngineConfig, PipelineConfig

    text = _text((site / "reference" / "python.html").read_text(encoding="utf-8"))
    assert "DEFAULT_BUDGET" not in text and "lambda" not in text and "default_factory" not in text
    assert f"max_images: int = {PipelineConfig().max_images}" in text
    assert "image_workers: int = max(1, os.cpu_count() or 1)" in text
    missing = []
    for cls in (PipelineConfig, HFEngineConfig):
        for f in dataclasses.fields(cls):
            help_text = " ".join(str(f.metadata.get("help", "")).split())
            if help_text and help_text not in text:
                missing.append(f"{cls.__name__}.{f.name}")
    assert missing == [], f"fields whose help text the reference does not show: {missing}"
    # Verifier's and RewardModel's engine keywords, written once (verifier.KEYWORDS), shown for both
    from adaptrubric_local.verifier import KEYWORDS, KEYWORDS_MARK

    assert KEYWORDS_MARK.strip() not in text
    for name, (_, sentence) in KEYWORDS.items():
        assert text.count(" ".join(sentence.replace("`", "").split())) >= 2, name


def test_the_python_reference_has_the_functions_the_rewards_page_names(site):
    """Every `rewards.NAME` function docs/rewards.md tells users to call has its own entry."""
    from adaptrubric_local import rewards

    page = (ROOT / "docs" / "rewards.md").read_text(encoding="utf-8")
    named = {n for n in re.findall(r"\brewards\.(\w+)", page) if callable(getattr(rewards, n, None))}
    assert {"trl_reward", "compute_score", "compute_score_async"} <= named
    html = (site / "reference" / "python.html").read_text(encoding="utf-8")
    absent = sorted(n for n in named | {"reward_func", "openrlhf_final_step", "configure"}
                    if f'id="adaptrubric_local.rewards.{n}"' not in html)
    assert absent == [], f"reward functions the rewards page names but the reference does not: {absent}"


def test_every_make_target_the_docs_name_exists():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    named = {(p.name, t) for p in pages for t in re.findall(r"^\s*make ([\w-]+)", p.read_text(encoding="utf-8"),
                                                             re.M)}
    assert ("index.md", "docs-serve") in named
    assert sorted(f"{p}: make {t}" for p, t in named if t not in targets) == []
    serve = re.search(r"^docs-serve:.*?(?=^\S|\Z)", makefile, re.S | re.M).group(0)
    assert "mkdocs serve" in serve
