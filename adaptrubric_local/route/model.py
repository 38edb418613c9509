"""The model router: the router prompt for a bank and the parser of the model's single `CATEGORY:`
line (markdown, case and spelling variants tolerated; anything else is the bank's fallback, unparsed).
Knows nothing about engines or trajectories.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from ..prompts import render
from ..types import FAMILIES, RouteResult

_CATEGORY_LINE = re.compile(r"^\W*category\W*[:=][ \t]*(.*)$", re.I | re.M)


def _family_named(value: str, families: Sequence[str] = FAMILIES) -> str | None:
    """The family a CATEGORY value names, tolerating markdown, case and spaces or hyphens for '_'."""
    words = [w.replace("-", "_") for w in re.findall(r"[a-z0-9]+(?:[_-][a-z0-9]+)*", value.lower())]
    names = ("_".join(words[:k]) for k in range(min(4, len(words)), 0, -1))  # "state-navigation", "info query"
    return next((name for name in names if name in families), None)


def parse_router_output(text: str, families: Sequence[str] = FAMILIES, fallback: str = "general") -> RouteResult:
    """Read the last `CATEGORY: <family>` line naming one of `families` (the bank's); unknown or
    missing -> `fallback` (the bank's fallback family), parsed=False."""
    hits = [_family_named(m.group(1), families) for m in _CATEGORY_LINE.finditer(text or "")]
    parsed = bool(hits and hits[-1])
    return RouteResult(category=hits[-1] if parsed else fallback, mode="model", raw=text, parsed=parsed)


def router_prompt(prompts, bank, instruction: str) -> str:
    """The router prompt for `bank`: the paper's text (`prompts.router`) for the paper's families,
    else `prompts.router_bank` listing the bank's families (with the fallback last)."""
    if bank.taxonomy == "paper" and not any(rs.router_description for rs in bank.families.values()):
        return render(prompts.router, "router", instruction=instruction)
    return bank_router_prompt(prompts, bank, instruction)


def bank_router_prompt(prompts, bank, instruction: str) -> str:
    """`prompts.router_bank` filled from `bank` (for the paper's bank this is the paper's text)."""
    fb = bank.fallback
    names = [n for n in bank.families if n != fb] + [fb]
    lines = [f"- {n} : {rs.router_description or prompts.router_descriptions.get(n) or rs.description}"
             for n, rs in ((n, bank.families[n]) for n in names)]
    # the decision rules that name only families of this bank, renumbered
    kept = [r for r in prompts.router_rules if {f for f in FAMILIES if re.search(rf"\b{f}\b", r)} <= set(names)]
    rules = [f"{n}. {render(r, 'router_rules', fallback=fb)}" for n, r in enumerate(kept, 1)]
    return render(prompts.router_bank, "router_bank", instruction=instruction, n_families=str(len(names)),
                  category_lines="\n".join(lines), decision_rules="\n".join(rules),
                  category_choices=" | ".join(names))
