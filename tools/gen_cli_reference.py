"""Write the command reference (docs/reference/cli.md) from the `adaptrubric` argument parsers.

Every command and subcommand the parser lists gets a section of its own (a heading per command, so a
search hit lands on the command) with its full help text (every option, as `--help-all` prints it),
formatted by the parser at a fixed width of 100 columns, so the page does not depend on the terminal it
was made in. A line the parser leaves longer than COLUMNS (an example command, a one-line description)
is broken to fit a code block at 1280 px without scrolling (tests/test_docs.py, CODE_COLUMNS): a command
at spaces with backslash continuations, its trailing comment moved to the line above; prose at
spaces. The page is committed; CI runs `--check`, which regenerates it and fails when the committed file
differs, so a flag that is added, renamed or documented differently shows up in the reference.

    python tools/gen_cli_reference.py            # write docs/reference/cli.md
    python tools/gen_cli_reference.py --check    # exit 1 when docs/reference/cli.md is stale
    python tools/gen_cli_reference.py --stdout   # print the page

Parsing only: it imports the command line's parser builder, no model code.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "cli.md"
WIDTH = 100
COLUMNS = 110  # the widest line of a code block on the page (tests/test_docs.py CODE_COLUMNS)
COMMAND = re.compile(r"(\$ )?(adaptrubric|accelerate|python|\.venv\S*/\S+|[A-Z_]+=\S+) ")

HEADER = """---
# reference: a search lands on a guide page first, and here on the command's own section
search:
  boost: 0.5
---

# Command reference

Every `adaptrubric` command with every option (what `--help-all` prints). This page is generated from
the parsers by `python tools/gen_cli_reference.py`; CI regenerates it and fails when it differs from this
file, so it is what the installed command prints. Task-oriented guides: [Scoring](../scoring.md),
[Evaluation](../evaluation.md), [Rewards](../rewards.md), [Distillation](../distillation.md),
[Rubric banks](../rubric-banks.md).
"""


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """The subcommands a parser lists in its help (aliases and hidden commands left out), in order."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:  # only the ones given a help text are listed
                out.append((choice.dest, action.choices[choice.dest]))
    return out


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) for the parser and every subcommand below it, depth first."""
    yield path, parser
    for name, sub in _subcommands(parser):
        yield from walk(sub, (*path, name))


def full_help(parser: argparse.ArgumentParser) -> str:
    """The parser's help with every option: what `--help-all` prints where `--help` is the short list."""
    try:
        return parser.format_help(every=True)
    except TypeError:  # a plain argparse parser: its --help is already everything
        return parser.format_help()


def fit(line: str, columns: int = COLUMNS) -> list[str]:
    """`line` as lines of at most `columns` characters where it can be broken at a space: a command
    line with backslash continuations (its trailing `# comment` moved above it), anything else wrapped at
    its own indentation. A single word longer than that stays whole."""
    if len(line) <= columns:
        return [line]
    indent = line[:len(line) - len(line.lstrip())]
    body = line.strip()
    if not COMMAND.match(body):
        return textwrap.wrap(body, min(columns, WIDTH), initial_indent=indent, subsequent_indent=indent,
                             break_long_words=False, break_on_hyphens=False) or [line]
    command, _, comment = body.partition("  # ")
    out = [f"{indent}# {comment.strip()}"] if comment else []
    words = command.strip().split(" ")
    current = indent + words[0]
    for word in words[1:]:
        if len(current) + 1 + len(word) + 2 > columns:
            out.append(current + " \\")
            current = indent + "    " + word
        else:
            current += " " + word
    out.append(current)
    return out


def render() -> str:
    """The page: the header, then one section per command, each its parser's help at WIDTH columns."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from adaptrubric_local.cli import build_parser

    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)  # argparse wraps at the terminal's width; fix it
    try:
        parts = [HEADER]
        for path, parser in walk(build_parser()):
            title = " ".join(("adaptrubric", *path))
            text = "\n".join(part for line in full_help(parser).rstrip().splitlines() for part in fit(line))
            parts.append(f"{'#' * (1 + max(1, len(path)))} `{title}`\n\n```text\n{text}\n```\n")
    finally:
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns
    return "\n".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help=f"exit 1 when {PAGE.relative_to(ROOT)} is not what "
                    "this prints")
    ap.add_argument("--stdout", action="store_true", help="print the page instead of writing it")
    args = ap.parse_args(argv)
    text = render()
    if args.stdout:
        sys.stdout.write(text)
        return 0
    if args.check:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: the parsers changed. Run `python tools/gen_cli_reference.py` "
                  "and commit the page.", file=sys.stderr)
            return 1
        print(f"{PAGE.relative_to(ROOT)} is up to date")
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
