"""The engine's padded-token budget (engine/budget.py): it falls to what fitted after an out-of-memory
error, grows back slowly, never past its start, and records every change."""
import pytest

from adaptrubric_local.engine.budget import TokenBudget


def test_an_out_of_memory_error_lowers_the_budget_to_what_fitted():
    b = TokenBudget(8000)
    b.out_of_memory(8000, rows=8)  # 8 rows of 1000 failed
    assert b.current == 7999
    b.out_of_memory(4000, rows=4)
    assert b.current == 3999
    b.fitted(2000)
    b.fitted(2000)
    assert b.current == 2000  # what fitted, not the half of what failed
    b.group_done()
    assert b.failed_attempts == 2
    assert [c["to"] for c in b.changes] == [7999, 3999, 2000] and all(c["group"] == 0 for c in b.changes)
    assert "out of memory at 8 rows" in b.changes[0]["why"] and "fitted" in b.changes[-1]["why"]


def test_it_grows_back_slowly_and_never_past_the_start():
    b = TokenBudget(10_000, grow_after=2, grow_factor=1.5)
    b.out_of_memory(10_000, rows=10)
    b.fitted(5000)
    b.group_done()
    seen = []
    for _ in range(8):
        b.fitted(1000)  # a small group: fits, says nothing about the budget by itself
        b.group_done()
        seen.append(b.current)
    assert seen == [5000, 7500, 7500, 10_000, 10_000, 10_000, 10_000, 10_000]
    assert b.stats["max_batch_tokens"] == b.stats["start_batch_tokens"] == 10_000
    assert [c["to"] for c in b.changes][-2:] == [7500, 10_000]


def test_a_fit_after_a_failure_in_another_group_does_not_raise_it():
    b = TokenBudget(8000)
    b.out_of_memory(6000, rows=6)
    b.fitted(3000)
    b.group_done()
    b.fitted(2000)  # later group, smaller: the budget stays at 3000
    b.group_done()
    assert b.current == 3000


def test_a_budget_must_be_positive():
    with pytest.raises(ValueError):
        TokenBudget(0)
