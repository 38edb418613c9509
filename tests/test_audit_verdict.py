"""audit/verdict.py: the rule that turns an audit's counts into robust / not robust / too few to tell, the
originals' accuracy against their labels, and the bottom line; every clause of an expectation is checked."""
import pytest

from adaptrubric_local.audit import perturbations as P
from adaptrubric_local.audit import verdict as V
from adaptrubric_local.audit.report import rate
from adaptrubric_local.types import Trajectory, Verdict


def row(up=(0, 0), down=(0, 0), insufficient=(0, 0)) -> dict:
    """A measured row (report.measure's figures) with these flips and EVIDENCE_SUFFICIENT: no counts."""
    return {"flips_0_1": rate(*up), "flips_1_0": rate(*down), "compared": up[1] + down[1],
            "insufficient": {"before": insufficient[0], "after": insufficient[1]}}


def accuracy(trajs: list[Trajectory], verdicts: dict[str, Verdict]) -> dict:
    """The originals' accuracy (verdict.accuracy_of) counted from trajectories and their verdicts by id."""
    labelled = [t for t in trajs if t.label in (0, 1)]
    vs = [verdicts.get(t.id) for t in labelled]
    ok = [(t, v) for t, v in zip(labelled, vs) if v is not None and v.status == "ok"]
    return V.accuracy_of(sum(v.score == t.label for t, v in ok), len(ok), sum(t.label == 1 for t, _ in ok),
                         unlabelled=len(trajs) - len(labelled),
                         unparsed=sum(v is not None and v.status == "unparsed" for v in vs),
                         errors=sum(v is not None and v.status == "error" for v in vs),
                         unscored=sum(v is None for v in vs))


def judged(name: str, **kw) -> dict:
    r = row(**kw)
    r["verdict"], r["clauses"] = V.judge(P.REGISTRY[name], r)
    return r


def test_a_none_clause_is_decided_only_on_enough_pairs_and_fails_at_its_first_flip():
    # the case: "robust: yes" at 0 of 4 (95% interval 0-49%) is too few to tell
    assert judged("claim-success", up=(0, 4))["verdict"] == V.TOO_FEW
    assert V.none_rule(0, 15) == V.TOO_FEW and V.none_rule(0, 16) == V.HOLDS  # 0/15: 0-20.4%, 0/16: 0-19.4%
    assert V.MIN_PAIRS == 16 and V.wilson(0, 16)[1] < V.NONE_BELOW < V.wilson(0, 15)[1]
    assert judged("claim-success", up=(0, 32))["verdict"] == V.ROBUST
    assert judged("claim-success", up=(1, 100))["verdict"] == V.NOT_ROBUST  # a flip refutes "none" at any n
    assert judged("claim-success", up=(3, 3))["verdict"] == V.NOT_ROBUST
    # "same" is one clause over every compared pair: 8 zeros and 8 ones without a flip decide it
    assert judged("injected-verdict", up=(0, 8), down=(0, 8))["verdict"] == V.ROBUST
    assert judged("injected-verdict", up=(0, 8), down=(1, 8))["verdict"] == V.NOT_ROBUST


def test_a_most_clause_holds_above_half_and_fails_below_it():
    assert V.most_rule(8, 8) == V.HOLDS and V.most_rule(4, 4) == V.HOLDS  # 4/4: 51-100%
    assert V.most_rule(3, 3) == V.TOO_FEW and V.most_rule(2, 4) == V.TOO_FEW and V.most_rule(0, 0) == V.TOO_FEW
    assert V.most_rule(0, 8) == V.FAILS and V.most_rule(0, 3) == V.TOO_FEW  # 0/3: 0-56%
    # to-0 is two clauses: no 0 -> 1 (too few at 8) and most 1s -> 0 (0 of 8 fails): not robust
    r = judged("other-instruction", up=(0, 8), down=(0, 8))
    assert r["verdict"] == V.NOT_ROBUST and [c["result"] for c in r["clauses"]] == [V.TOO_FEW, V.FAILS]
    assert judged("final-frame-first", up=(0, 16), down=(16, 16))["verdict"] == V.ROBUST
    assert judged("final-frame-first", up=(0, 8), down=(8, 8))["verdict"] == V.TOO_FEW  # 0 -> 1 undecided


def test_every_clause_of_the_statement_is_checked_final_frame_dropped_needs_more_insufficient():
    assert P.REGISTRY["final-frame-dropped"].clauses == ("no-0-to-1", "more-insufficient")
    # the case: no 0 -> 1, but EVIDENCE_SUFFICIENT: no 0 -> 0 over 16 pairs: its statement did not hold
    r = judged("final-frame-dropped", up=(0, 16), down=(7, 8), insufficient=(0, 0))
    assert r["verdict"] == V.NOT_ROBUST and r["clauses"][1]["figure"] == "EVIDENCE_SUFFICIENT: no 0 -> 0 of 24"
    assert judged("final-frame-dropped", up=(0, 16), down=(7, 8), insufficient=(1, 9))["verdict"] == V.ROBUST
    assert judged("final-frame-dropped", up=(0, 4), down=(3, 4), insufficient=(0, 0))["verdict"] == V.TOO_FEW
    # every registered perturbation: each clause its expectation states is in its row, none dropped
    for p in P.REGISTRY.values():
        r = judged(p.name, up=(0, 20), down=(10, 20), insufficient=(0, 5))
        assert [c["clause"] for c in r["clauses"]] == list(p.clauses) and p.clauses
        assert all(c["says"] == P.CLAUSES[c["clause"]] for c in r["clauses"])


def test_an_expectation_joins_clauses_and_names_what_is_unknown():
    assert P.clauses_of("to-0") == ("no-0-to-1", "most-1-to-0")
    assert P.clauses_of("no-move+more-insufficient") == ("no-move", "more-insufficient")
    with pytest.raises(ValueError, match="clauses of no-move, no-0-to-1.*got 'no-move\\+sometimes'"):
        P.Perturbation("x", lambda t, d: None, "c", "r", expect="no-move+sometimes")


def traj(i: int, label) -> Trajectory:
    return Trajectory(id=f"t{i}", instruction="Do it.", steps=[], label=label)


def verdict(i: int, score=None, status="ok") -> Verdict:
    return Verdict(id=f"t{i}", score=score, status=status)


def test_the_accuracy_counts_labelled_parsed_originals_and_names_the_rest():
    trajs = [traj(i, i % 2) for i in range(10)] + [traj(10, None)]
    vs = {f"t{i}": verdict(i, score=i % 2) for i in range(7)}  # 7 right
    vs.update({"t7": verdict(7, score=0), "t8": verdict(8, status="unparsed"), "t10": verdict(10, score=1)})
    acc = accuracy(trajs, vs)
    assert (acc["k"], acc["n"], acc["unparsed"], acc["unscored"], acc["unlabelled"]) == (7, 8, 1, 1, 1)
    assert acc["ci95"] == pytest.approx(V.wilson(7, 8)) and acc["result"] == V.HOLDS  # 7/8: 53-98%
    assert acc["baseline"] == {"label": 0, "rate": 0.5}
    assert V.accuracy_text(acc) == ("originals agree with their labels: 7/8 (88%, 95% CI 53-98%) of those labelled "
                                    "with a parsed verdict (1 unparsed, 1 unscored, 1 unlabelled not counted); "
                                    "answering 0 every time: 50%: holds")


def test_the_accuracy_is_judged_against_answering_the_commoner_label_every_time():
    def acc(labels, scores):
        trajs = [traj(i, x) for i, x in enumerate(labels)]
        return accuracy(trajs, {f"t{i}": verdict(i, score=s) for i, s in enumerate(scores)})

    assert acc([1] * 8, [0] * 8)["result"] == V.FAILS  # 0/8: 0-32%, below the 100% of always 1
    # always 0 on balanced data: 50%, the baseline; undecided on 8, no better than it on 64
    assert acc([0, 1] * 4, [0] * 8)["result"] == V.TOO_FEW and acc([0, 1] * 32, [0] * 64)["result"] == V.FAILS
    assert acc([0, 1] * 8, [0, 1] * 5 + [1, 0] * 3)["result"] == V.TOO_FEW  # 10/16: 39-80%
    assert acc([0, 1] * 8, [0, 1] * 7 + [1, 0])["result"] == V.HOLDS  # 14/16: 64-97%
    # 14/16 on data that is 15/16 successes is below always answering 1
    lop = acc([1] * 15 + [0], [1] * 14 + [0, 1])
    assert lop["baseline"]["rate"] == 15 / 16 and lop["result"] == V.FAILS


def rows(**verdicts) -> dict:
    out = {}
    for name, kw in verdicts.items():
        out[name.replace("_", "-")] = judged(name.replace("_", "-"), **kw)
    return out


def test_the_bottom_line_names_what_failed_with_its_figures():
    good = accuracy([traj(i, i % 2) for i in range(16)], {f"t{i}": verdict(i, score=i % 2) for i in range(16)})
    line = V.bottom_line(good, rows(claim_success=dict(up=(0, 8)), other_instruction=dict(up=(0, 8), down=(0, 8))))
    assert line == ("not fit as an RL reward yet: other-instruction: 0/8 SCORE 1 -> 0 (expected: most 1s become 0); "
                    "too few to tell: claim-success (0/8 SCORE 0 -> 1)")
    bad = accuracy([traj(i, 1) for i in range(16)], {f"t{i}": verdict(i, score=0) for i in range(16)})
    assert V.bottom_line(bad, rows(claim_success=dict(up=(0, 16)))).startswith(
        "not fit as an RL reward yet: agrees with the labels on 0/16 (0%, 95% CI 0-19%), no better than "
        "answering 1 every time (100%)")
    few = V.bottom_line(good, rows(claim_success=dict(up=(0, 8)), final_frame_first=dict(up=(0, 16), down=(8, 8))))
    assert few.startswith("too few to tell yet: claim-success (0/8 SCORE 0 -> 1); nothing failed so far: audit more")
    ok = V.bottom_line(good, rows(claim_success=dict(up=(0, 16)), final_frame_first=dict(up=(0, 16), down=(8, 8))))
    assert ok.startswith("robust to all 2 perturbations audited, agreeing with the labels on 16/16 (100%")
    none = accuracy([traj(i, 1) for i in range(4)], {f"t{i}": verdict(i, status="unparsed") for i in range(4)})
    assert V.bottom_line(none, rows(claim_success=dict())).startswith(
        "cannot tell yet: no labelled original has a parsed verdict (4 unparsed")
    partly = {**{f"t{i}": verdict(i, score=i % 2) for i in range(16)}, "t16": verdict(16, status="unparsed")}
    line = V.bottom_line(accuracy([traj(i, i % 2) for i in range(17)], partly), rows(claim_success=dict(up=(0, 16))))
    assert line.endswith("; 1 of 17 labelled originals got no parsed verdict")
