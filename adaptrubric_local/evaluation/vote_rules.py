"""Precision, recall, NPV and TNR of each vote rule side by side, from one scoring run with `--votes k`:
the rules are a function of the votes each verdict line keeps (`votes`), so no rescoring is needed.

Pure: the input is each labelled trajectory's votes (1, 0, or None for a vote that did not parse) and its
label; the output is one `RuleFigures` per rule. A trajectory a rule leaves undecided (votes.py: a tie,
or an unparsed vote that could have decided it) counts as a predicted failure, as unparsed verdicts do in
evaluation/metrics.py (the paper's fixed denominators), and how many did so is in `undecided`. Ratios are
percentages, None when undefined. Knows nothing about files, models or the eval report's layout.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..votes import NAMED, VoteRule


@dataclass(frozen=True)
class RuleFigures:
    """One rule's confusion matrix and rates over the labelled trajectories."""

    rule: str
    n: int
    undecided: int
    tp: int
    fp: int
    tn: int
    fn: int

    @staticmethod
    def _pct(num: int, den: int) -> float | None:
        return 100.0 * num / den if den else None

    @property
    def precision(self) -> float | None:
        """Of the trajectories the rule passes, the share that succeeded."""
        return self._pct(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float | None:
        """Of the successes, the share the rule passes."""
        return self._pct(self.tp, self.tp + self.fn)

    @property
    def npv(self) -> float | None:
        """Of the trajectories the rule fails (undecided ones included), the share that failed."""
        return self._pct(self.tn, self.tn + self.fn)

    @property
    def tnr(self) -> float | None:
        """Of the failures, the share the rule fails."""
        return self._pct(self.tn, self.tn + self.fp)

    def to_dict(self) -> dict:
        """The counts and the four rates, JSON-ready."""
        return dict(rule=self.rule, n=self.n, undecided=self.undecided, tp=self.tp, fp=self.fp, tn=self.tn,
                    fn=self.fn, precision=self.precision, recall=self.recall, npv=self.npv, tnr=self.tnr)


def default_rules(k: int) -> list[str]:
    """majority, all, any, and at-least-M for every M strictly between 1 and k."""
    return [*NAMED, *(f"at-least-{m}" for m in range(2, k))]


def rule_figures(votes: Sequence[Sequence[int | None]], labels: Sequence[int],
                 rules: Sequence[str] | None = None) -> list[RuleFigures]:
    """One RuleFigures per rule (default: `default_rules` of the longest vote list) over the trajectories'
    votes and their 0/1 labels, in the same order. Every trajectory needs as many votes as the rules need."""
    if len(votes) != len(labels):
        raise ValueError(f"{len(votes)} vote lists for {len(labels)} labels")
    bad = [i for i, y in enumerate(labels) if y not in (0, 1)]
    if bad:
        raise ValueError(f"labels must be 0 or 1: trajectory {bad[0]} has {labels[bad[0]]!r}")
    k = max((len(v) for v in votes), default=0)
    out = []
    for name in rules if rules is not None else default_rules(k):
        rule = VoteRule(name)
        c = {"tp": 0, "fp": 0, "tn": 0, "fn": 0}
        undecided = 0
        for vs, y in zip(votes, labels):
            score, _ = rule.decide(list(vs))
            undecided += score is None
            pred = score or 0
            c[("t" if pred == y else "f") + ("p" if pred == 1 else "n")] += 1
        out.append(RuleFigures(rule=name, n=len(labels), undecided=undecided, **c))
    return out
