"""Helpers for the transformers engine's tests."""
from __future__ import annotations


def sub_batches(engine, order: list[int], est: dict[int, int],
                shape: dict[int, tuple[int, int, int]] | None = None) -> list[list[int]]:
    """The engine's length-sorted groups of `order` under its batch-size and padded-token budgets (as the
    budget is now), formed one after another as `generate_iter` forms them."""
    shape = shape or {i: (est[i], 0, 0) for i in order}
    groups, rest = [], list(order)
    while rest:
        groups.append(engine._group(rest, est, shape))
        rest = rest[len(groups[-1]):]
    return groups
