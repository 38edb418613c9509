"""Vote rules: how the k sampled verdicts of `--votes k` become one verdict (docs/scoring.md, "Votes").

`majority` (more 1s than 0s among the parsed votes; a tie or no parsed vote is unparsed), `all`, `any`
and `at-least-M` (SCORE 1 once M of the k votes say 1, 0 once fewer than M can; between the two an
unparsed vote could have decided it, and the verdict is unparsed: never silently a 0 or a 1). Each
verdict keeps every vote (1, 0, or None), the rule, `vote_share` (the share of parsed votes that say 1)
and `p_success` (the model's own, averaged over the parsed votes that report it). Knows nothing about
models, prompts or trajectories.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .types import Verdict

MAJORITY = "majority"
NAMED = (MAJORITY, "all", "any")
_AT_LEAST = re.compile(r"^at-least-([1-9][0-9]*)$")
SAMPLE_SEPARATOR = "\n\n----- sample -----\n"


@dataclass(frozen=True)
class VoteRule:
    """One vote rule by name: majority, all, any or at-least-M."""

    name: str = MAJORITY

    def __post_init__(self):
        if self.name not in NAMED and not _AT_LEAST.match(self.name):
            raise ValueError(f"vote rule must be one of {', '.join(NAMED)} or at-least-M (M >= 1), got {self.name!r}")

    def threshold(self, k: int) -> int | None:
        """How many 1-votes of k make a 1; None for majority. An at-least-M rule with M > k is a ValueError."""
        if self.name == MAJORITY:
            return None
        m = {"all": k, "any": 1}.get(self.name) or int(_AT_LEAST.match(self.name).group(1))  # type: ignore[union-attr]
        if m > k:
            raise ValueError(f"vote rule {self.name} needs at least {m} votes, got --votes {k}")
        return m

    def decide(self, votes: Sequence[int | None]) -> tuple[int | None, str | None]:
        """(SCORE, None) or (None, why no score) for one trajectory's votes (1, 0, None: unparsed)."""
        return self.decide_counts(*counts(votes))

    def decide_counts(self, ones: int, zeros: int, k: int) -> tuple[int | None, str | None]:
        """`decide` from how many of the k votes say 1 and 0 (the rest did not parse): every rule is a
        function of these three numbers."""
        if ones + zeros == 0:
            return None, "no sample was parseable"
        m = self.threshold(k)
        if m is None:
            if ones == zeros:
                return None, f"tied vote ({ones} vs {zeros})"
            return int(ones > zeros), None
        if ones >= m:
            return 1, None
        if k - zeros < m:  # the 1s and the unparsed votes together cannot reach m
            return 0, None
        return None, f"{self.name}: {ones} of {k} votes say 1 and {k - ones - zeros} did not parse"


def counts(votes: Sequence[int | None]) -> tuple[int, int, int]:
    """(votes that say 1, votes that say 0, k) of one trajectory's votes (1, 0, None: unparsed)."""
    return sum(v == 1 for v in votes), sum(v == 0 for v in votes), len(votes)

def vote(verdicts: list[Verdict], raw: str, rule: VoteRule | None = None,
         probs: Sequence[float | None] | None = None) -> Verdict:
    """One verdict from k sampled ones under `rule` (default majority): the first vote agreeing with the
    outcome gives the other fields; `probs` are each sample's P(SCORE=1) (None where not reported)."""
    rule = rule or VoteRule()
    votes = [v.score if v.status == "ok" else None for v in verdicts]
    parsed = [x for x in votes if x is not None]
    share = sum(parsed) / len(parsed) if parsed else None
    reported = [p for p, x in zip(probs or [], votes) if p is not None and x is not None]
    p_model = sum(reported) / len(reported) if reported else None
    joined = SAMPLE_SEPARATOR.join(v.raw or "" for v in verdicts) if verdicts else raw
    kept = dict(votes=votes, vote_rule=rule.name, vote_share=share, raw=joined)
    score, why = rule.decide(votes) if verdicts else (None, "no sample was parseable")
    if score is None:
        return Verdict(status="unparsed", parse_error=why, **kept)
    best = next(v for v in verdicts if v.status == "ok" and v.score == score)
    return replace(best, p_success=p_model, **kept)
