"""The transformers engine's padded-token budget per generate call, which learns from out-of-memory errors.

An attempt that runs out of memory lowers it below that attempt's cost at once; the attempts that
then fit set it to the largest of them, so later groups are formed at that size instead of failing
again. After `grow_after` groups in a row that fit, it grows by `grow_factor`, never past where it
started. Every change is kept (`changes`, the last `keep`) with its group and why. Knows nothing
about models, requests or memory arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TokenBudget:
    """Padded tokens (rows x the longest row's prompt and new tokens, x samples) one generate call may hold."""

    start: int
    grow_after: int = 8
    grow_factor: float = 1.125
    keep: int = 100
    current: int = 0
    changes: list = field(default_factory=list)
    failed_attempts: int = 0
    _groups: int = 0
    _fits_in_a_row: int = 0
    _failed_cost: int | None = None  # the cheapest attempt that failed in the group being run
    _fitted: int = 0  # the dearest attempt that fitted since that failure

    def __post_init__(self):
        if self.start < 1:
            raise ValueError(f"the token budget must be >= 1, got {self.start}")
        self.current = self.current or self.start

    def _set(self, value: int, why: str) -> None:
        value = max(1, min(self.start, int(value)))
        if value != self.current:
            self.changes.append({"group": self._groups, "from": self.current, "to": value, "why": why})
            del self.changes[:-self.keep]
            self.current = value

    def out_of_memory(self, cost: int, rows: int) -> None:
        """An attempt of `rows` rows costing `cost` padded tokens ran out of memory."""
        self.failed_attempts += 1
        self._fits_in_a_row = 0
        self._failed_cost = cost if self._failed_cost is None else min(self._failed_cost, cost)
        self._fitted = 0
        if cost <= self.current:
            self._set(cost - 1, f"out of memory at {rows} rows, {cost} padded tokens")

    def fitted(self, cost: int) -> None:
        """An attempt costing `cost` padded tokens ran to the end."""
        if self._failed_cost is not None and cost < self._failed_cost:
            self._fitted = max(self._fitted, cost)
            self._set(self._fitted, f"{self._fitted} padded tokens fitted after running out of memory at "
                                    f"{self._failed_cost}")

    def group_done(self) -> None:
        """A group (with the retries of its parts) is finished."""
        self._groups += 1
        if self._failed_cost is not None:
            self._failed_cost, self._fitted = None, 0
            return
        self._fits_in_a_row += 1
        if self._fits_in_a_row >= self.grow_after and self.current < self.start:
            self._fits_in_a_row = 0
            self._set(self.current * self.grow_factor, f"{self.grow_after} groups in a row fitted")

    @property
    def stats(self) -> dict:
        return {"max_batch_tokens": self.current, "start_batch_tokens": self.start,
                "failed_attempts": self.failed_attempts, "budget_changes": list(self.changes)}
