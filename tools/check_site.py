"""Check the BUILT documentation site (site/) for markdown that rendered as something else.

`mkdocs build --strict` checks links and anchors, not whether a page shows what its markdown says.
Python-Markdown ends a list at a line it does not read as part of it (a block indented differently, a
code block in an item), and what follows becomes paragraphs holding the literal markers. Over every
page's article this reports:

- a paragraph whose text starts with a list marker (`* `, `- `, `+ `, `1. `), or holds a line that does:
  a list that became text;
- a paragraph that starts with `(` or a lower-case word: a sentence whose beginning was lost, or that
  a blank line or a misread line cut in two;
- a paragraph or list item holding a literal code fence (```) or `**`: a code block or bold text that
  was not read as one;
- a list, then a code block, then a list: a code block meant for a list item (indented less than the
  4 spaces Python-Markdown needs) that ended the list instead.

Text inside code and the Python reference's signatures is not prose and is not checked. A paragraph that
starts with a code span (`` `--resume` makes...``) or a bold lead-in (`**verl's routes.**`) is not a
lower-case start, nor is any docstring of the Python reference (a help text such as "token cap for router
outputs" is written lower-case; its lists and code are checked).

    python tools/check_site.py site      # exit 1 and one line per problem: page, paragraph

Standard library only; it does not know markdown, only the HTML MkDocs wrote.
"""
from __future__ import annotations

import argparse
import html as html_text
import re
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

LIST_MARKER = re.compile(r"(?:^|\n)[ \t]*(?:[*+-]|\d{1,3}[.)])[ \t]+\S")
MID_SENTENCE = re.compile(r"\(|[a-z]+\b(?![-_./(=])")  # a word like `e.g.`/`pip` in a name is not one
FENCE = "```"
VOID = {"br", "hr", "img", "input", "meta", "link", "wbr", "source", "area", "col", "embed", "param", "track"}
SKIP = {"code", "pre", "script", "style", "kbd", "samp"}  # text in these is not prose


@dataclass
class Block:
    """One paragraph or list item of a page: its text with code left out, and how it starts."""

    tag: str
    text: str = ""
    excerpt: str = ""
    starts_with_code: bool | None = None  # a code span or bold lead-in first; None until content is seen
    docstring: bool = False  # prose of the Python reference's docstrings (mkdocstrings' doc-contents)
    parts: list[str] = field(default_factory=list)  # the prose
    shown: list[str] = field(default_factory=list)  # everything, code included (for the message)


class _Paragraphs(HTMLParser):
    """Collects the <p> and <li> blocks inside the page's <article> (the page's own content)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self._stack: list[str] = []
        self._open: list[Block] = []
        self._article = 0
        self._skip = 0
        self._docs = 0  # open elements of class doc-contents or doc-section-item

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        is_doc = bool({"doc-contents", "doc-section-item"} & set(classes))
        self._stack.append((tag, is_doc))
        self._docs += is_doc
        if tag == "article":
            self._article += 1
        if not self._article or self._skip:
            return
        if tag in SKIP or "doc-signature" in classes:
            if self._open and self._open[-1].starts_with_code is None:
                self._open[-1].starts_with_code = tag == "code"
            self._skip = len(self._stack)  # skipped until this element closes
        elif tag in ("p", "li"):
            self._open.append(Block(tag, docstring=self._docs > 0))
        elif tag in ("strong", "b") and self._open and self._open[-1].starts_with_code is None:
            self._open[-1].starts_with_code = True

    def handle_endtag(self, tag):
        if tag in VOID or tag not in (t for t, _ in self._stack):
            return
        while self._stack:  # close what the page left open inside this element
            depth, (top, is_doc) = len(self._stack), self._stack.pop()
            self._docs -= is_doc
            if self._skip:
                if depth == self._skip:
                    self._skip = 0
            elif self._article and top in ("p", "li") and self._open:
                block = self._open.pop()
                block.text, block.excerpt = "".join(block.parts), " ".join("".join(block.shown).split())[:90]
                self.blocks.append(block)
            if top == "article":
                self._article -= 1
            if top == tag:
                break

    def handle_data(self, data):
        if not self._article or not self._open:
            return
        block = self._open[-1]
        block.shown.append(data)
        if self._skip:
            return
        if block.starts_with_code is None and data.strip():
            block.starts_with_code = False
        block.parts.append(data)


BROKEN_LIST = re.compile(r"</(ul|ol)>\s*(?:<div[^>]*>\s*)?<pre\b.*?</pre>\s*(?:</div>\s*)?<\1\b", re.S)


def problems_in(html: str) -> list[str]:
    """What looks like markdown that did not render, one short line per block."""
    parser = _Paragraphs()
    parser.feed(html)
    out = []
    for m in BROKEN_LIST.finditer(html):
        code = html_text.unescape(re.sub(r"<[^>]+>", "", m.group(0).split("<pre", 1)[1].split(">", 1)[1]))
        out.append(f"a list broken by a code block: {' '.join(code.split())[:90]!r}")
    for block in parser.blocks:
        text = block.text.strip()
        if not text:
            continue
        excerpt = block.excerpt
        if FENCE in block.text:
            out.append(f"a literal code fence in a <{block.tag}>: {excerpt!r}")
        if "**" in block.text:
            out.append(f"literal ** (bold that did not render) in a <{block.tag}>: {excerpt!r}")
        if block.tag != "p":
            continue
        if LIST_MARKER.search(block.text.lstrip()):
            out.append(f"a list rendered as a paragraph: {excerpt!r}")
        elif not block.starts_with_code and not block.docstring and MID_SENTENCE.match(text):
            out.append(f"a paragraph that starts mid-sentence: {excerpt!r}")
    return out


def check(site: Path) -> list[str]:
    """Every problem of every page under `site` (the search index and assets are not pages)."""
    pages = sorted(p for p in site.rglob("*.html") if "assets" not in p.relative_to(site).parts)
    if not pages:
        return [f"{site}: no HTML pages (build the site first: mkdocs build --strict)"]
    out = []
    for page in pages:
        for problem in problems_in(page.read_text(encoding="utf-8")):
            out.append(f"{page.relative_to(site).as_posix()}: {problem}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", type=Path, nargs="?", default=Path("site"), help="the built site's folder")
    args = ap.parse_args(argv)
    found = check(args.site)
    for line in found:
        print(line, file=sys.stderr)
    if found:
        print(f"{len(found)} rendering problem(s) in {args.site}", file=sys.stderr)
        return 1
    print(f"{args.site}: every page renders its markdown (lists, paragraphs, code blocks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
