"""Precision, recall, NPV and TNR of each vote rule side by side, from one scoring run with `--votes k`.

Every rule is a function of (votes that say 1, votes that say 0, k) (votes.py's `decide_counts`), so the
input is those counts per labelled trajectory (the verdict table's `vote_*` columns) and its label. A
trajectory a rule leaves undecided (and an error or missing verdict: no votes) counts as a predicted
failure, as in evaluation/metrics.py, and is counted in `undecided`. Ratios are percentages, None when
undefined. `of_rows` gives metrics.json's `vote_rules` section, `render_table` its text. Knows nothing
about files or models.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..votes import NAMED, VoteRule
from .benchmark_figures import counts, figures_of_counts, md_head, md_row


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

    def _figure(self, name: str) -> float | None:
        """One ratio of the confusion matrix, as benchmark_figures computes every figure of eval."""
        return figures_of_counts({"tp": self.tp, "fp": self.fp, "tn": self.tn, "fn": self.fn})[name]

    precision = property(lambda self: self._figure("prec"), doc="Of the trajectories passed, the share that succeeded.")
    recall = property(lambda self: self._figure("rec"), doc="Of the successes, the share the rule passes.")
    npv = property(lambda self: self._figure("npv"), doc="Of those failed (undecided included), the share that failed.")
    tnr = property(lambda self: self._figure("tnr"), doc="Of the failures, the share the rule fails.")

    def to_dict(self) -> dict:
        """The counts and the four rates, JSON-ready."""
        return {**asdict(self), **{k: getattr(self, k) for k in ("precision", "recall", "npv", "tnr")}}


def default_rules(k: int) -> list[str]:
    """majority, all, any, and at-least-M for every M strictly between 1 and k."""
    return [*NAMED, *(f"at-least-{m}" for m in range(2, k))]


def rule_figures(ones: Sequence[int], zeros: Sequence[int], k: Sequence[int], labels: Sequence[int],
                 rules: Sequence[str] | None = None) -> list[RuleFigures]:
    """One RuleFigures per rule (default: `default_rules` of the fewest votes a trajectory has, k > 0)
    over each trajectory's votes that say 1 (`ones`), say 0 (`zeros`), its number of votes (`k`; 0: none,
    an error or missing verdict) and its 0/1 label, in the same order (votes.py's `counts` of a vote list)."""
    if not len(ones) == len(zeros) == len(k) == len(labels):
        raise ValueError(f"{len(ones)}, {len(zeros)} and {len(k)} vote counts for {len(labels)} labels")
    bad = np.flatnonzero(~np.isin(np.asarray(labels, dtype=object), (0, 1)))
    if len(bad):
        raise ValueError(f"labels must be 0 or 1: trajectory {bad[0]} has {labels[bad[0]]!r}")
    ones, zeros, k, labels = (np.asarray(a, dtype=np.int64) for a in (ones, zeros, k, labels))
    wrong = np.flatnonzero((ones < 0) | (zeros < 0) | (ones + zeros > k))
    if len(wrong):
        i = wrong[0]
        raise ValueError(f"trajectory {i} has {ones[i]} and {zeros[i]} votes saying 1 and 0 of {k[i]}")
    cases, times = np.unique(np.stack([ones, zeros, k, labels]), axis=1, return_counts=True)
    out = []
    for name in rules if rules is not None else default_rules(int(k[k > 0].min()) if (k > 0).any() else 0):
        rule = VoteRule(name)  # each distinct case decided once
        scores = [rule.decide_counts(n1, n0, kk)[0] for n1, n0, kk, _ in cases.T.tolist()]
        undecided = sum(n for s, n in zip(scores, times.tolist()) if s is None)
        c = counts([s or 0 for s in scores], cases[3], weights=times)
        out.append(RuleFigures(rule=name, n=len(labels), undecided=undecided, **c))
    return out


def of_rows(rows: dict[str, np.ndarray]) -> list[dict] | None:
    """The `vote_rules` section of metrics.json from a verdict table's rows (verdict_table.py): each
    rule's figures over the labelled rows, or None when no verdict has more than one vote."""
    if "vote_k" not in rows or not (rows["vote_k"] > 1).any():
        return None
    labelled = rows["label"] >= 0
    return [f.to_dict() for f in rule_figures(rows["vote_ones"][labelled], rows["vote_zeros"][labelled],
                                              rows["vote_k"][labelled], rows["label"][labelled])]


def render_table(figs: Sequence[dict]) -> str:
    """The rules' figures (`RuleFigures.to_dict`) as a Markdown table a person reads; '-' marks an
    undefined ratio."""
    def pct(x):
        return "-" if x is None else f"{x:.1f}"

    n = figs[0]["n"] if figs else 0
    lines = ["Vote rules side by side, each from the same votes (percent)", "",
             *md_head("rule", "prec", "recall", "NPV", "TNR", "tp", "fp", "tn", "fn", "undecided", left=1)]
    lines += [md_row(f["rule"], *(pct(f[k]) for k in ("precision", "recall", "npv", "tnr")),
                     *(f[k] for k in ("tp", "fp", "tn", "fn", "undecided"))) for f in figs]
    lines += ["", f"Each rule over the same {n} labelled trajectories' votes (percent); a trajectory a rule leaves "
              "undecided, and an error or missing verdict, counts as a predicted failure."]
    return "\n".join(lines) + "\n"


__all__ = ["RuleFigures", "default_rules", "of_rows", "render_table", "rule_figures"]
