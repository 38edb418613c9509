"""Which trajectories a person should label first: the order (and, with a budget, the subset) of the
review page's cards.

- `fp-first`: by outcome (false positives, false negatives, unparsed, errors, then the right ones), the
  most confident mistake first; the page's own default sort. Needs labels.
- `uncertain`: |p - 0.5| smallest first (p: `p_success_calibrated`, else `p_success`); none last.
- `disagree`: where a second verdict file (`compare`) says otherwise: different parsed SCOREs first (the
  larger |pA - pB| first), then one side without a parsed verdict, then the agreeing ones by |pA - pB|.
- `random`: a shuffle seeded by `seed`.

For all but `fp-first`, what a person has decided goes last: ids the labels files (`reviewed`) leave
out first, then those they mark unsure, then those they label (the data's own labels move no card).
Ties keep the verdict file's order. Knows nothing about pages or files.
"""
from __future__ import annotations

import random as _random
from dataclasses import dataclass, field

from ..types import Verdict
from .review import OUTCOMES, error_confidence, outcome
from .tts import probability

ORDERS = ("fp-first", "uncertain", "disagree", "random")


@dataclass
class ReviewOrderConfig:
    """How `adaptrubric review` orders and limits its cards for labelling."""

    order: str | None = field(default=None, metadata={
        "choices": ORDERS, "help": "order the cards for labelling: fp-first (false positives first, as the page "
                                   "sorts), uncertain (p_success nearest 0.5 first), disagree (where --compare "
                                   "says otherwise first), random (seeded by --seed); unlabelled trajectories "
                                   "first except for fp-first",
                  "none": "every card, in the page's own sort, false positives first"})
    budget: int | None = field(default=None, metadata={
        "metavar": "N", "help": "write only the first N cards of --order (a labelling batch)", "none": "all of them"})
    compare: str | None = field(default=None, metadata={
        "metavar": "B.jsonl", "help": "a second verdict file over the same data (for --order disagree; its SCORE "
                                      "and p_success are shown on each card)", "none": "no second file"})
    seed: int = field(default=42, metadata={"help": "seed of --order random"})

    def __post_init__(self):
        if self.order is not None and self.order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if self.budget is not None and self.budget < 1:
            raise ValueError(f"budget must be at least 1, got {self.budget}")
        if self.budget is not None and self.order is None:
            raise ValueError("--budget N takes the first N cards of an order: give --order too "
                             f"({', '.join(ORDERS)})")
        if self.order == "disagree" and not self.compare:
            raise ValueError("--order disagree needs --compare B.jsonl (a second verdict file over the same data)")


def _parsed(v: Verdict | None) -> bool:
    return v is not None and v.status == "ok" and v.score in (0, 1)


def _gap(a: Verdict, b: Verdict | None) -> float:
    pa, pb = probability(a), probability(b) if b is not None else None
    return abs(pa - pb) if pa is not None and pb is not None else 0.0


def disagreement(a: Verdict, b: Verdict | None) -> tuple[int, float]:
    """(kind, size): 0 both parsed and different, 1 one side unparsed or missing, 2 agree."""
    if _parsed(a) and _parsed(b):
        return (0 if a.score != b.score else 2), _gap(a, b)
    return (2 if not _parsed(a) and b is not None and not _parsed(b) else 1), _gap(a, b)


def _reason(order: str, v: Verdict, b: Verdict | None) -> str:
    if order == "uncertain":
        p = probability(v)
        return "no probability" if p is None else f"|p - 0.5| = {abs(p - 0.5):.3f}"
    if order == "disagree":
        kind, gap = disagreement(v, b)
        if b is None:
            return "no verdict in the compared file"
        side = lambda x: str(x.score) if _parsed(x) else x.status  # noqa: E731
        return (f"SCORE {side(v)} vs {side(b)}" + (f", |pA - pB| = {gap:.3f}" if kind != 1 or gap else ""))
    if order == "fp-first":
        conf = error_confidence(v)
        return outcome(v) + (f", confidence of the error {conf:.3f}" if conf is not None and
                             outcome(v) in ("FP", "FN") else "")
    return "random"


def decided(reviewed: dict[str, int | None] | None, v: Verdict) -> int:
    """0: no labels file names the verdict's id; 1: one marks it unsure; 2: one labels it 0/1."""
    if not reviewed or str(v.id) not in reviewed:
        return 0
    return 1 if reviewed[str(v.id)] is None else 2


def arrange(verdicts: list[Verdict], order: str, compare: dict[str, Verdict] | None = None,
            seed: int = 42, budget: int | None = None,
            reviewed: dict[str, int | None] | None = None) -> list[tuple[Verdict, str]]:
    """The verdicts in `order` (the first `budget` of them), each with why it stands where it does.
    `reviewed`: id -> label (None: unsure) of the labels files, whose ids go last (`decided`)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if order == "disagree" and compare is None:
        raise ValueError("the disagree order needs a second verdict file")
    compare = compare or {}
    shuffled = list(range(len(verdicts)))
    _random.Random(seed).shuffle(shuffled)
    pos = {i: k for k, i in enumerate(shuffled)}

    def key(i):
        v = verdicts[i]
        if order == "fp-first":
            conf = error_confidence(v)
            return (OUTCOMES.index(outcome(v)), -(conf if conf is not None else -1.0), i)
        if order == "uncertain":
            p = probability(v)
            return (decided(reviewed, v), p is None, abs(p - 0.5) if p is not None else 0.0, i)
        if order == "disagree":
            kind, gap = disagreement(v, compare.get(str(v.id)))
            return (decided(reviewed, v), kind, -gap, i)
        return (decided(reviewed, v), pos[i])
    chosen = sorted(range(len(verdicts)), key=key)[:budget]
    said = {1: "; marked unsure in the labels files", 2: "; labelled in the labels files"}
    return [(verdicts[i], _reason(order, verdicts[i], compare.get(str(verdicts[i].id)))
             + (said.get(decided(reviewed, verdicts[i]), "") if order != "fp-first" else "")) for i in chosen]
