"""The built documentation site (site/, `make docs`) in a real browser, opened from the files on disk
(file://, no server, every network request refused): the search box is there and works offline, and
searching "resume", "labels" and "vllm" puts a guide page or a command's own section of the command
reference first; at 1280 px no code block of any page needs a sideways scroll, and a code block holds
the CODE_COLUMNS that tests/test_docs.py allows a code line.

The browser is the system's headless Chromium (never a downloaded one) driven by playwright, as in
tests/test_review_browser.py. site/ is built by `make docs`; `make docs-browser` (which `.ci/run` runs
after `make test`) builds it, then runs this file with ADAPTRUBRIC_REQUIRE_DOCS_SITE=1: there a missing
site, browser or playwright fails.
Elsewhere, without site/ (or with a site older than docs/ and mkdocs.yml) these tests skip with a
message; ADAPTRUBRIC_DOCS_SITE names another built folder.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from browser_support import chromium
from test_docs import CODE_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("ADAPTRUBRIC_DOCS_SITE", ROOT / "site"))
REQUIRED = os.environ.get("ADAPTRUBRIC_REQUIRE_DOCS_SITE") == "1"
QUERIES = ["resume", "labels", "vllm"]


def _skip(why: str):
    if REQUIRED:
        pytest.fail(f"{why} (ADAPTRUBRIC_REQUIRE_DOCS_SITE=1)")
    pytest.skip(why)


def _stale() -> bool:
    """Whether a page source or the site's config changed after site/ was built."""
    built = (SITE / "index.html").stat().st_mtime
    sources = [ROOT / "mkdocs.yml", *(ROOT / "docs").rglob("*")]
    return any(p.is_file() and p.stat().st_mtime > built for p in sources)


@pytest.fixture(scope="module")
def site() -> Path:
    if not (SITE / "index.html").is_file():
        _skip(f"no built site in {SITE}: `make docs` builds it")
    if not REQUIRED and _stale():
        _skip(f"{SITE} is older than docs/ or mkdocs.yml: `make docs` rebuilds it")
    return SITE


@pytest.fixture(scope="module")
def browser(site):
    yield from chromium(_skip)


def _tab(browser):
    """A 1280x900 tab that may load files only: a request to the network is refused and recorded."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)  # the search box stays disabled when its worker cannot start
    page.refused, page.errors = [], []
    page.on("pageerror", lambda e: page.errors.append(str(e)))

    def only_files(route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            page.refused.append(route.request.url)
            route.abort()

    context.route("**/*", only_files)
    return context, page


@pytest.fixture
def tab(browser):
    context, page = _tab(browser)
    yield page
    context.close()


@pytest.fixture(scope="module")
def searched(browser, site):
    """{query: its results}, searched in one tab from site/index.html on disk; and that tab."""
    context, page = _tab(browser)
    yield {q: search(page, site, q) for q in QUERIES}, page
    context.close()


def guide_pages() -> set[str]:
    """The Home page and the Guide group of the site's nav, as the file names the offline site uses."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    pages = {"index.md"}
    for item in nav:
        for name, value in item.items():
            if name == "Guide":
                pages |= {p for entry in value for p in entry.values()}
    return {p.removesuffix(".md") + ".html" for p in pages}


def search(page, site: Path, query: str) -> list[tuple[str, str]]:
    """(page file, #anchor or '') of every result the search box shows for `query`, best first: each
    page's group of results in order, the page itself first when it matched as a whole."""
    page.goto((site / "index.html").as_uri())
    page.fill("input.md-search__input", query)
    page.wait_for_selector(".md-search-result__item", timeout=15_000)
    hrefs = page.eval_on_selector_all(".md-search-result__item a.md-search-result__link",
                                      "links => links.map(a => a.href)")
    out = []
    for href in hrefs:
        path, _, anchor = href.removeprefix(site.as_uri() + "/").partition("#")
        out.append((path.split("?", 1)[0], anchor))
    return out


def first_hit(results: list[tuple[str, str]]) -> tuple[str, str]:
    """The result a reader lands on: the best page's first section (or the page, when it has none)."""
    page = results[0][0]
    sections = [r for r in results if r[0] == page and r[1]]
    return sections[0] if sections else results[0]


def test_a_guide_page_or_a_commands_section_comes_first(searched):
    found, tab = searched
    guides = guide_pages()
    assert {"scoring.html", "engines.html", "evaluation.html"} <= guides
    for query, results in found.items():
        page, anchor = first_hit(results)
        on_a_command = page == "reference/cli.html" and anchor.startswith("adaptrubric-")
        assert page in guides or on_a_command, f"{query!r}: first result {page}#{anchor} ({results[:5]})"
    assert tab.refused == [] and tab.errors == []


def test_the_search_is_where_its_results_are_expected(searched):
    """What a reader searching these words wants, by name: stopping and resuming, the labels files,
    the vLLM engine."""
    expected = {"resume": ("scoring.html", "stopping-and-resuming"), "labels": ("data.html", "labels-files"),
                "vllm": ("engines.html", "vllm-in-process")}
    found, tab = searched
    assert {q: first_hit(results) for q, results in found.items()} == expected
    assert tab.refused == []


def test_no_code_block_scrolls_sideways_at_1280_px(tab, site):
    pages = sorted(p for p in site.rglob("*.html") if "assets" not in p.relative_to(site).parts
                   and p.name != "404.html")
    assert len(pages) >= 10
    cut = {}
    columns = None
    for path in pages:
        tab.goto(path.as_uri())
        wide = tab.evaluate("""() => Array.from(document.querySelectorAll('article pre > code'))
            .filter(c => c.scrollWidth > c.clientWidth + 1)
            .map(c => c.textContent.split('\\n').reduce((a, b) => a.length >= b.length ? a : b).slice(0, 80))""")
        if wide:
            cut[path.relative_to(site).as_posix()] = wide
        if columns is None and tab.locator("article pre > code").count():
            columns = tab.evaluate("""() => {
                const code = document.querySelector('article pre > code');
                const probe = document.createElement('span');
                probe.textContent = 'x'.repeat(200);
                code.appendChild(probe);
                const w = probe.getBoundingClientRect().width / 200;
                probe.remove();
                const cs = getComputedStyle(code);
                return Math.floor((code.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight)) / w);
            }""")
    assert cut == {}, f"code blocks cut off at 1280 px: {cut}"
    assert columns is not None and columns >= CODE_COLUMNS, (columns, CODE_COLUMNS)
    assert tab.refused == []
