"""The coarse and fine stages for a batch of instructions, with caches (paper §4.1-4.2): each distinct
instruction routed once, the fine cues generated once per distinct (instruction, family), so a GRPO
group or a best-of-N pool shares one router call and one cue call. Each model call's cost is kept under
its cache key (`fresh`) until the orchestrator shares it out. Model calls go through a function it is
given; knows nothing about engines' internals, images or verdicts.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from ..bank import RubricBank
from ..engine.base import Output, Request
from ..prompts import PromptSet
from ..route import parse_router_output, route_rules, router_prompt
from ..types import CueResult, RouteResult
from .cues import cue_prompt, manual_cues, parse_cues

CallFn = Callable[[list[Request]], list[Output]]


class Criteria:
    """Route and cue instructions through `call` (None: no model), caching both."""

    def __init__(self, call: CallFn | None, config, bank: RubricBank, prompts: PromptSet):
        self.call, self.config, self.bank, self.prompts = call, config, bank, prompts
        self.routes: dict[str, RouteResult] = {}
        self.cues: dict[tuple[str, str], CueResult] = {}
        self.fresh: dict[tuple, tuple[int, int]] = {}  # cache key -> (tokens, calls) not yet shared out
        self.unparsed = {"route": 0, "cue": 0}

    def route_many(self, instructions: Iterable[str]) -> dict[str, RouteResult]:
        """Route each distinct instruction once (cached across calls)."""
        instructions = list(instructions)
        todo = [i for i in dict.fromkeys(instructions) if i not in self.routes]
        cfg = self.config
        if cfg.fixed_category:
            self.routes.update({i: RouteResult(category=cfg.fixed_category, mode="fixed") for i in todo})
        elif cfg.router == "rules":  # the rules know the paper's families; others go to the bank's fallback
            for i in todo:
                res = route_rules(i)
                self.routes[i] = res if res.category in self.bank.families else replace(
                    res, category=self.bank.fallback, raw=res.category)
        elif todo:
            reqs = [Request(prompt=router_prompt(self.prompts, self.bank, i), kind="route",
                            max_new_tokens=cfg.route_max_new_tokens) for i in todo]
            if self.call is None:
                raise ValueError("the model router needs an engine; use router='rules' to run without a model")
            names, fallback = self.bank.family_names, self.bank.fallback
            for ins, out in zip(todo, self.call(reqs)):
                res = parse_router_output(out.text, names, fallback) if not out.error else RouteResult(
                    category=fallback, mode="model", raw=out.error, parsed=False)
                self.unparsed["route"] += not res.parsed
                self.routes[ins] = res
                self.fresh[("route", ins)] = (out.prompt_tokens + out.completion_tokens, 1)
        return {i: self.routes[i] for i in instructions}

    def cues_many(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], CueResult]:
        """Fine cues for each distinct (instruction, family), generated once (cached)."""
        pairs = list(dict.fromkeys(pairs))
        cfg = self.config
        if not cfg.fine:  # not cached: a later run with the fine stage on must generate them
            return {p: CueResult(abstained=True, reason="fine stage off") for p in pairs}
        todo = [p for p in pairs if p not in self.cues]
        if cfg.manual_cues is not None or self.call is None:
            for ins, cat in todo:
                self.cues[(ins, cat)] = manual_cues(cfg.manual_cues or [], ins, filter_words=cfg.cue_filter,
                                                    limit_length=cfg.cue_filter)
        elif todo:
            reqs = [Request(prompt=cue_prompt(self.prompts, ins, cat, self.bank.lookup(cat)), kind="cue",
                            max_new_tokens=cfg.cue_max_new_tokens) for ins, cat in todo]
            for p, out in zip(todo, self.call(reqs)):  # not None: without a model the cues are manual
                res = parse_cues(out.text, p[0], filter_words=cfg.cue_filter,
                                 limit_length=cfg.cue_filter) if not out.error else CueResult(
                    abstained=True, reason=f"cue call failed: {out.error}", parsed=False)
                self.unparsed["cue"] += not res.parsed
                self.cues[p] = res
                self.fresh[("cue", *p)] = (out.prompt_tokens + out.completion_tokens, 1)
        return {p: self.cues[p] for p in pairs}

    def take_costs(self, keys_of: Callable[[int], list[tuple]], n: int) -> list[tuple[float, float]]:
        """Share the cost of fresh calls out over items 0..n-1 (`keys_of(i)`: the cache keys item i
        used); returns (tokens, calls) per item. Keys no item used stay for a later batch."""
        users: dict[tuple, list[int]] = {}
        for i in range(n):
            for key in filter(self.fresh.__contains__, keys_of(i)):
                users.setdefault(key, []).append(i)
        shares = [(0.0, 0.0)] * n
        for key, items in users.items():
            tokens, calls = self.fresh.pop(key)
            for i in items:
                shares[i] = (shares[i][0] + tokens / len(items), shares[i][1] + calls / len(items))
        return shares
