"""`audit` over a stream (audit/streamed.py, tally.py): the data is never loaded whole and the verdict
files are read line by line, yet the report's figures are those of the list-based measure; the review
page of a large audit shows a stated number of originals; `DataSet` keeps instructions, not trajectories,
and picks the same other instruction as the whole-list definition."""
import random
import re
import zlib

from test_audit import audit_with, data_set, gullible

from adaptrubric_local.audit import perturbations as P
from adaptrubric_local.audit import report as RP
from adaptrubric_local.audit import tally as T
from adaptrubric_local.evaluation import harness
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.types import Step, Trajectory

WHOLE = ("adaptrubric_local.formats.load_trajectories", "adaptrubric_local.audit.run.load_trajectories",
         "adaptrubric_local.evaluation.harness.load_verdicts")


def _measure(p, cfs, original, counter, engine_options):
    """One perturbation's row from lists of trajectories and verdicts, the pairs counted one by one."""
    counts = T.PairCounts()
    for c in cfs:
        o, v = original.get(P.split_id(c.id)[0]), counter.get(c.id)
        counts.add(None if o is None else T.compact(o), None if v is None else T.compact(v), c.id)
    return RP.row_of(p, len(cfs), counts, engine_options)


def _refuse(*a, **kw):
    raise AssertionError("the audit read a whole file")


def test_the_audit_streams_its_data_and_counts_its_verdicts_line_by_line(tmp_path, monkeypatch):
    data = data_set(tmp_path, per_task=3)
    trajs = load_trajectories(data).trajectories
    for name in WHOLE:
        monkeypatch.setattr(name, _refuse)
    audit = audit_with(gullible, data, tmp_path / "a")
    monkeypatch.undo()
    cfs = P.build_all(P.get(), trajs)
    main = {str(v.id): v for v in harness.load_verdicts(tmp_path / "a" / "verdicts.jsonl")}
    for p in P.get():
        vs = main if p.engine_options is None else {
            str(v.id): v for v in harness.load_verdicts(tmp_path / "a" / f"verdicts.{p.name}.jsonl")}
        row = _measure(p, cfs[p.name], main, vs, audit["perturbations"][p.name]["engine_options"])
        assert audit["perturbations"][p.name] == row, p.name
    assert audit["perturbations"]["claim-success"]["flip_ids"]["0->1"] == \
        [f"{t.id}~claim-success" for t in trajs if t.label == 0]  # in data order
    assert audit["originals"]["n"] == len(trajs) == audit["verdict"]["accuracy"]["n"]


def test_the_review_page_of_a_large_audit_says_how_many_originals_it_shows(tmp_path):
    data = data_set(tmp_path)
    audit_with(gullible, data, tmp_path / "a", review_limit=2)
    page = (tmp_path / "a" / "review_files" / "index.js").read_text()  # the page's notes and cards
    assert "showing 2 of the 6 originals" in page
    cards = "".join(f.read_text() for f in sorted((tmp_path / "a" / "review_files" / "cards").glob("*.js")))
    shown = {i for i in re.findall(r'"id":"([^"]+)"', cards) if "~" not in i}
    failures = [t.id for t in load_trajectories(data).trajectories if t.label == 0]
    assert len(shown) == 2 and shown <= set(failures)  # the originals with a flip come first
    full = tmp_path / "b"
    audit_with(gullible, data, full)
    assert "showing" not in (full / "review_files" / "index.js").read_text()


def _whole_list_pick(trajs, traj):  # the definition over every trajectory, as it was
    others = sorted({t.instruction for t in trajs if t.instruction != traj.instruction
                     and (traj.task_id is None or t.task_id != traj.task_id)})
    return others[zlib.crc32(traj.id.encode("utf-8")) % len(others)] if others else None


def test_the_data_set_keeps_instructions_and_picks_as_the_whole_list_did():
    rng = random.Random(3)
    shot = [Step(screenshot="a.png", action="tap")]
    for _ in range(30):
        trajs = [Trajectory(id=f"t{k}", instruction=f"do {rng.randrange(6)}", steps=shot,
                            task_id=rng.choice([None, "a", "b", "c"])) for k in range(rng.randrange(1, 12))]
        data = P.DataSet(trajs)
        assert len(data.tasks) <= len(trajs)
        for t in trajs:
            assert data.other_instruction(t) == _whole_list_pick(trajs, t)
