"""Test-time scaling (evaluation/tts.py): the paper's fixed per-task shuffle (seed 42, one generator per
task), EarlyStop/BestOfN/Random/Oracle against values worked out by hand, Table 12's pool and headroom,
and what the reports say when the verdicts carry no information."""
import json
import random

import pytest

from adaptrubric_local import Verdict
from adaptrubric_local.evaluation import harness, tts

from conftest import TTS_SET, hand_verdict


def _groups(verdicts, seed=tts.SEED):
    """task_id -> labelled candidates in the order `tts` takes them (tts.shuffled)."""
    by_task = {}
    for v in verdicts:
        if v.task_id is not None and v.label in (0, 1):
            by_task.setdefault(str(v.task_id), []).append(v)
    return {t: tts.shuffled(c, seed) for t, c in sorted(by_task.items())}

def test_tts_by_hand():
    r = tts.curves(TTS_SET, seed=None)  # candidates in id order, so every number can be checked by hand
    assert r["earlystop"] == {1: 50.0, 2: 25.0, 3: 50.0}
    assert r["bestofn"] == {1: 50.0, 2: 50.0, 3: 50.0}
    assert r["bestofn_soft"] == {1: 50.0, 2: 50.0, 3: 50.0}
    assert r["random"][1] == 50.0 and r["random"][2] == 50.0 and r["random"][3] == pytest.approx(125 / 3)
    assert r["oracle"] == {1: 50.0, 2: 75.0, 3: 75.0}
    assert r["gain_over_random"]["earlystop"][3] == pytest.approx(50 - 125 / 3)
    p = r["pool"]
    assert (p["tasks"], p["all_fail"], p["all_pass"], p["mixed"]) == (4, 1, 0, 3)
    # equal trials per task: Random@1 (expected, one uniform trial per task) equals the trial SR
    assert p["trial_sr"] == pytest.approx(500 / 12) and p["random_at_1_expected"] == pytest.approx(500 / 12)
    assert p["oracle_at_max"] == 75.0 and p["headroom"] == pytest.approx(75 - 500 / 12)
    assert p["unparsed"] == 2 and p["scored"] == 10 and r["informative"] is True


def test_tts_selection_rules():
    t1 = [v for v in TTS_SET if v.task_id == "T1"]
    assert tts.earlystop(t1, 3).id == "c1"             # first predicted success
    assert tts.bestofn(t1, 3).id == "c2"               # last of the tied successes
    t4 = [v for v in TTS_SET if v.task_id == "T4"]
    assert tts.bestofn(t4, 3).id == "c3" and tts.bestofn(t4, 3, soft=True).id == "c3"
    assert tts.bestofn(t4, 2, soft=True).id == "c1"    # p_success breaks the tie
    t3 = [v for v in TTS_SET if v.task_id == "T3"]
    assert tts.earlystop(t3, 1).id == "c1"             # unparsed is not success: falls back to last scanned


def test_tts_shuffle_is_fixed_per_task():
    a = _groups(TTS_SET)
    b = _groups(list(reversed(TTS_SET)))
    assert {k: [v.id for v in c] for k, c in a.items()} == {k: [v.id for v in c] for k, c in b.items()}
    assert sorted(v.id for v in a["T1"]) == ["c1", "c2", "c3"]
    with pytest.raises(ValueError, match="task_id"):
        tts.curves([hand_verdict("x", 1, 1)])


def _scored(i, task, label, score=1, status="ok", p=None):
    return Verdict(id=i, task_id=task, label=label, score=score, status=status, p_success=p)


def test_pool_percentages_with_several_mixed_tasks():
    tasks = {"f": [_scored("f1", "f", 0), _scored("f2", "f", 0)], "p": [_scored("p1", "p", 1), _scored("p2", "p", 1)],
             "m1": [_scored("a", "m1", 0), _scored("b", "m1", 1)], "m2": [_scored("c", "m2", 1), _scored("d", "m2", 0)]}
    out = tts.over_tasks(tasks.values(), 2)["pool"]
    assert (out["all_fail"], out["all_pass"], out["mixed"]) == (1, 1, 2)
    assert (out["all_fail_pct"], out["all_pass_pct"], out["mixed_pct"]) == (25.0, 25.0, 50.0)


def test_curves_use_the_given_seed():
    # every candidate is verified 1, so EarlyStop@1 takes the first candidate of the order
    vs = [_scored(f"c{i}", "t", int(i == 0)) for i in range(6)]
    first_42 = _groups(vs, 42)["t"][0]
    assert first_42.id != "c0"  # the seed-42 order does not start with the sorted first candidate
    assert tts.curves(vs, seed=None)["earlystop"][1] == 100.0
    assert tts.curves(vs, seed=42)["earlystop"][1] == 100.0 * first_42.label == 0.0
    assert tts.curves(vs)["earlystop"][1] == 0.0


def _candidate(i, task, label, score=None, status="ok", p=None):
    return Verdict(id=i, task_id=task, label=label, score=score, status=status, p_success=p)


def test_rank_ignores_scores_of_unscored_verdicts():
    stale = _candidate("a", "t", 0, score=1, status="unparsed")
    good = _candidate("b", "t", 1, score=0)
    assert tts._rank(stale) == -1 and tts._rank(good) == 0
    assert tts.earlystop([stale, good], 2) is good
    assert tts.bestofn([good, stale], 2) is good


def test_bestofn_hard_and_soft():
    a, b, c = _candidate("a", "t", 1, 1, p=0.9), _candidate("b", "t", 0, 1, p=0.2), _candidate("c", "t", 0, 1, p=None)
    assert tts.bestofn([a, b], 2) is b  # hard: ties go to the last
    assert tts.bestofn([a, b], 2, soft=True) is a
    assert tts.bestofn([a, c], 2, soft=True) is a  # no p_success ranks below any probability
    assert tts.bestofn([c, b], 2, soft=True) is b
    assert tts.bestofn([a, b, c], 1) is a


def _verdicts():
    vs = []
    # task A: 4 candidates, one success, scores disagree with labels in places
    vs += [_candidate("A0", "A", 0, 1, p=0.4), _candidate("A1", "A", 1, 1, p=0.8), _candidate("A2", "A", 0, 0),
           _candidate("A3", "A", 0, 1, p=0.6)]
    # task B: all fail; task C: all pass (one unparsed); unlabelled and task-less verdicts are ignored
    vs += [_candidate("B0", "B", 0, 0), _candidate("B1", "B", 0, 1, p=0.7)]
    vs += [_candidate("C0", "C", 1, None, "unparsed"), _candidate("C1", "C", 1, 1, p=0.9), _candidate("C2", "C", 1, 0)]
    vs += [_candidate("X", "A", None, 1), _candidate("Y", None, 1, 1), Verdict(id="E", task_id="B", label=0,
                                                                               status="error")]
    return vs


def test_groups_pin_the_seed_42_order_per_task():
    vs = _verdicts()
    g = _groups(vs)
    assert list(g) == ["A", "B", "C"]
    for task, ids in (("A", ["A0", "A1", "A2", "A3"]), ("B", ["B0", "B1", "E"]), ("C", ["C0", "C1", "C2"])):
        expected = list(ids)
        random.Random(42).shuffle(expected)
        assert [v.id for v in g[task]] == expected
    assert [v.id for v in _groups(vs, seed=None)["A"]] == ["A0", "A1", "A2", "A3"]
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
        "scored": 8, "unparsed": 1, "errors": 1, "missing": 0})


def test_curves_default_seed_and_budget_below_the_pool():
    vs = _verdicts()
    assert tts.curves(vs) == tts.curves(vs, seed=42)
    g = _groups(vs)
    one = tts.curves(vs, max_n=1)
    assert one["earlystop"] == {1: pytest.approx(100.0 * sum(c[0].label for c in g.values()) / 3)}
    assert list(one["bestofn"]) == [1] and list(one["bestofn_soft"]) == [1]
    assert one["bestofn"][1] == one["earlystop"][1] == one["bestofn_soft"][1]
    assert one["pool"]["oracle_at_max"] == pytest.approx(100.0 * sum(c[0].label for c in g.values()) / 3)
    assert one["pool"]["random_at_1_expected"] == pytest.approx(125 / 3)


def test_uninformative_and_empty():
    vs = [_candidate("a", "t", 1, None, "unparsed"), Verdict(id="b", task_id="t", label=0, status="error")]
    out = tts.curves(vs, seed=None)
    assert out["gain_over_random"] is None and out["informative"] is False
    assert out["note"] == ("no candidate was scored (1 unparsed, 1 errors): EarlyStop and BestOfN only reflect "
                           "candidate order, so no gains over Random are reported")
    with pytest.raises(ValueError) as ei:
        tts.curves([_candidate("a", None, 1, 1)])
    assert str(ei.value) == ("no labelled verdicts with a task_id: test-time scaling needs candidates grouped "
                             "by task")


IDS = [f"traj{k:02d}" for k in range(10)]


def V(id, task, label, score=0, status="ok"):
    return Verdict(id=id, task_id=task, label=label, score=score if status == "ok" else None, status=status)


def _pool(tasks, status="ok"):
    # every task has the same ten candidate ids (listed in reverse, so sorting is needed), labels vary
    return [V(i, t, int(i[-1]) % 2, status=status) for t in tasks for i in reversed(IDS)]


def _expected_order(ids, seed=42):
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    return order


def _orders(verdicts, **kw):
    return {t: [v.id for v in c] for t, c in _groups(verdicts, **kw).items()}


def test_each_task_gets_the_seed_42_order():
    got = _orders(_pool(["T1", "T2", "T3"]))
    want = _expected_order(IDS)
    assert got == {"T1": want, "T2": want, "T3": want}
    # the test can tell: seed 0 gives another order, and so does one generator shared by the tasks
    assert _expected_order(IDS, seed=0) != want
    shared = random.Random(42)
    orders = []
    for _ in range(3):
        o = sorted(IDS)
        shared.shuffle(o)
        orders.append(o)
    assert orders[1] != want and orders[2] != want


def test_adding_a_task_keeps_the_other_tasks_orders():
    before = _orders(_pool(["T1", "T2"]))
    after = _orders(_pool(["A0", "T1", "T2", "Z9"]))  # one task sorted before them, one after
    assert after["T1"] == before["T1"] and after["T2"] == before["T2"]
    # and a task's order does not depend on which of its candidates other tasks have
    alone = _orders([v for v in _pool(["T2"]) if v.id != "traj03"])
    assert alone["T2"] == _expected_order([i for i in IDS if i != "traj03"])


def test_seed_option_and_unshuffled():
    assert _orders(_pool(["T1"]), seed=7)["T1"] == _expected_order(IDS, seed=7)
    assert _orders(_pool(["T1"]), seed=None)["T1"] == sorted(IDS)


def test_headroom_is_oracle_minus_random_at_1_as_table_12_defines():
    # unequal trials: T1 4 trials (1 success), T2 1 trial (1 success), T3 2 trials (0)
    vs = [V("a", "T1", 1), V("b", "T1", 0), V("c", "T1", 0), V("d", "T1", 0), V("e", "T2", 1),
          V("f", "T3", 0), V("g", "T3", 0)]
    p = tts.curves(vs)["pool"]
    assert p["trial_sr"] == pytest.approx(200 / 7)                       # pooled over the 7 trials
    assert p["random_at_1_expected"] == pytest.approx(100 * (0.25 + 1 + 0) / 3)  # one uniform trial per task
    assert p["oracle_at_max"] == pytest.approx(200 / 3)
    assert p["headroom"] == pytest.approx(200 / 3 - 125 / 3)
    assert p["random_at_1_expected"] != pytest.approx(p["trial_sr"])


def test_table_12_row_reproduced():
    # the 8B-only pool of Table 12: 113 tasks x 8 trials, 48 all-fail, 44 all-pass, 21 mixed,
    # trial SR 51.44%, Oracle@8 57.52%, headroom +6.08
    successes = [0] * 48 + [8] * 44
    rest = 465 - 8 * 44  # 465 successes of 904 trials in all -> 113 over the 21 mixed tasks
    successes += [rest // 21 + (k < rest % 21) for k in range(21)]
    vs = [V(f"c{j}", f"task{t:03d}", int(j < s)) for t, s in enumerate(successes) for j in range(8)]
    p = tts.curves(vs)["pool"]
    assert (p["tasks"], p["all_fail"], p["all_pass"], p["mixed"]) == (113, 48, 44, 21)
    assert round(p["trial_sr"], 2) == 51.44 and round(p["oracle_at_max"], 2) == 57.52
    assert round(p["headroom"], 2) == 6.08


@pytest.mark.parametrize("status", ["unparsed", "error"])
def test_no_information_is_said_not_reported_as_gains(tmp_path, status):
    vs = _pool(["T1", "T2"], status=status)
    r = tts.curves(vs)
    assert r["informative"] is False and r["gain_over_random"] is None and status in r["note"]
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps(v.to_dict()) + "\n" for v in vs))
    harness.run_tts(path, tmp_path / "out")
    report = (tmp_path / "out" / "report.md").read_text()
    assert "carry no information" in report and "Gains over Random" not in report
    assert json.loads((tmp_path / "out" / "tts.json").read_text())["gain_over_random"] is None


def test_one_scored_candidate_is_information(tmp_path):
    vs = _pool(["T1"], status="unparsed")
    vs[0] = V(vs[0].id, "T1", vs[0].label, score=1)
    r = tts.curves(vs)
    assert r["informative"] is True and r["gain_over_random"]["earlystop"]
