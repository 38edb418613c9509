"""Exact-value tests for test-time scaling (evaluation/tts.py): the seed-42 order, soft and hard
BestOfN, budgets below the pool size, the pool composition, and the messages."""
import random

import pytest

from adaptrubric_local.evaluation import tts
from adaptrubric_local.types import Verdict


def V(i, task, label, score=None, status="ok", p=None):
    return Verdict(id=i, task_id=task, label=label, score=score, status=status, p_success=p)


def test_rank_ignores_scores_of_unscored_verdicts():
    stale = V("a", "t", 0, score=1, status="unparsed")
    good = V("b", "t", 1, score=0)
    assert tts._rank(stale) == -1 and tts._rank(good) == 0
    assert tts.earlystop([stale, good], 2) is good
    assert tts.bestofn([good, stale], 2) is good


def test_bestofn_hard_and_soft():
    a, b, c = V("a", "t", 1, 1, p=0.9), V("b", "t", 0, 1, p=0.2), V("c", "t", 0, 1, p=None)
    assert tts.bestofn([a, b], 2) is b  # hard: ties go to the last
    assert tts.bestofn([a, b], 2, soft=True) is a
    assert tts.bestofn([a, c], 2, soft=True) is a  # no p_success ranks below any probability
    assert tts.bestofn([c, b], 2, soft=True) is b
    assert tts.bestofn([a, b, c], 1) is a


def _verdicts():
    vs = []
    # task A: 4 candidates, one success, scores disagree with labels in places
    vs += [V("A0", "A", 0, 1, p=0.4), V("A1", "A", 1, 1, p=0.8), V("A2", "A", 0, 0), V("A3", "A", 0, 1, p=0.6)]
    # task B: all fail; task C: all pass (one unparsed); unlabelled and task-less verdicts are ignored
    vs += [V("B0", "B", 0, 0), V("B1", "B", 0, 1, p=0.7)]
    vs += [V("C0", "C", 1, None, "unparsed"), V("C1", "C", 1, 1, p=0.9), V("C2", "C", 1, 0)]
    vs += [V("X", "A", None, 1), V("Y", None, 1, 1), Verdict(id="E", task_id="B", label=0, status="error")]
    return vs


def test_groups_pin_the_seed_42_order_per_task():
    vs = _verdicts()
    g = tts.groups(vs)
    assert list(g) == ["A", "B", "C"]
    for task, ids in (("A", ["A0", "A1", "A2", "A3"]), ("B", ["B0", "B1", "E"]), ("C", ["C0", "C1", "C2"])):
        expected = list(ids)
        random.Random(42).shuffle(expected)
        assert [v.id for v in g[task]] == expected
    assert [v.id for v in tts.groups(vs, seed=None)["A"]] == ["A0", "A1", "A2", "A3"]
    assert [v.id for v in g["A"]] != ["A0", "A1", "A2", "A3"]  # the shuffle does something here


def test_curves_exact_values_sorted_order():
    out = tts.curves(_verdicts(), seed=None)
    third = 100.0 / 3
    assert out["earlystop"] == pytest.approx({1: third, 2: third, 3: third, 4: third})
    assert out["bestofn"] == pytest.approx({1: third, 2: 2 * third, 3: 2 * third, 4: third})
    assert out["bestofn_soft"] == pytest.approx({1: third, 2: 2 * third, 3: 2 * third, 4: 2 * third})
    assert out["random"] == pytest.approx({1: third, 2: 50.0, 3: (1 / 3 + 1) / 3 * 100, 4: (0.25 + 1) / 3 * 100})
    assert out["oracle"] == pytest.approx({1: third, 2: 2 * third, 3: 2 * third, 4: 2 * third})
    assert out["gain_over_random"]["bestofn"][4] == pytest.approx(third - 125 / 3)
    assert out["informative"] is True and "note" not in out
    pool = dict(out["pool"])
    assert pool.pop("trials_per_task") == {"min": 3, "max": 4}
    assert pool == pytest.approx({
        "tasks": 3, "all_fail": 1, "all_pass": 1, "mixed": 1,
        "all_fail_pct": third, "all_pass_pct": third, "mixed_pct": third, "trial_sr": 400 / 10,
        "oracle_at_max": 2 * third, "random_at_1_expected": 125 / 3, "headroom": 2 * third - 125 / 3,
        "scored": 8, "unparsed": 1, "errors": 1})


def test_curves_default_seed_and_budget_below_the_pool():
    vs = _verdicts()
    assert tts.curves(vs) == tts.curves(vs, seed=42)
    g = tts.groups(vs)
    one = tts.curves(vs, max_n=1)
    assert one["earlystop"] == {1: pytest.approx(100.0 * sum(c[0].label for c in g.values()) / 3)}
    assert list(one["bestofn"]) == [1] and list(one["bestofn_soft"]) == [1]
    assert one["bestofn"][1] == one["earlystop"][1] == one["bestofn_soft"][1]
    assert one["pool"]["oracle_at_max"] == pytest.approx(100.0 * sum(c[0].label for c in g.values()) / 3)
    assert one["pool"]["random_at_1_expected"] == pytest.approx(125 / 3)


def test_uninformative_and_empty():
    vs = [V("a", "t", 1, None, "unparsed"), Verdict(id="b", task_id="t", label=0, status="error")]
    out = tts.curves(vs, seed=None)
    assert out["gain_over_random"] is None and out["informative"] is False
    assert out["note"] == ("no candidate was scored (1 unparsed, 1 errors): EarlyStop and BestOfN only reflect "
                           "candidate order, so no gains over Random are reported")
    with pytest.raises(ValueError) as ei:
        tts.curves([V("a", None, 1, 1)])
    assert str(ei.value) == ("no labelled verdicts with a task_id: test-time scaling needs candidates grouped "
                             "by task")
