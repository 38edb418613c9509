"""`distill collect` over a stream (distill/collect.py): the data is never loaded whole, the teacher's
first call comes before the stream has handed out every record, judgments are written as they come,
and a resume reads the collected file's ids without parsing its lines."""
import json
from dataclasses import replace

from adaptrubric_local.distill import collect as C
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.formats.stream import stream_trajectories

from conftest import canonical_record, write_jsonl

N, BATCH = 24, 4


def _data(tmp_path):
    recs = [canonical_record(tmp_path, f"s{i:02d}", 2, instruction=f"Open the app number {i}.", label=i % 2,
                             task_id=f"task{i % 6}") for i in range(N)]
    return write_jsonl(tmp_path / "d.jsonl", recs)


def _refuse(*a, **kw):
    raise AssertionError("collect read a whole file")


def test_collect_streams_its_records_and_writes_each_judgment_as_it_comes(tmp_path, monkeypatch):
    data = _data(tmp_path)
    teacher = C.label_teacher(load_trajectories(data).trajectories)
    stream = stream_trajectories(data)
    handed, at_first_call, lines_then = [], [], []
    items = stream.items

    def counted(keep=None):
        for pos, x in items(keep):
            handed.append(pos)
            yield pos, x

    stream.items = counted
    generate = teacher.generate
    out = tmp_path / "dist"

    def noted(requests, **kw):
        if not at_first_call:
            at_first_call.append(len(handed))
        if any(r.kind == "verify" for r in requests) and not lines_then and len(handed) > 2 * BATCH:
            f = out / "collected.jsonl"
            lines_then.append(sum(1 for _ in open(f)) if f.exists() else 0)
        return generate(requests, **kw)

    teacher.generate = noted
    monkeypatch.setattr("adaptrubric_local.formats.load_trajectories", _refuse)
    pcfg = replace(C.teacher_pipeline("labels"), trajectories_per_batch=BATCH)
    man = C.collect(data, out, teacher, pcfg, C.CollectConfig(val_fraction=0.0), progress=False, loaded=stream)
    assert man["this_run"]["collected"] == N
    assert at_first_call[0] <= 2 * BATCH < N  # the teacher was asked before the data was read through
    assert lines_then and lines_then[0] >= BATCH  # judgments on disk while records were still to come
    assert len({json.loads(x)["task_id"] for x in open(out / "train.jsonl")}) == 6


def test_a_resume_reads_ids_only_and_skips_what_is_collected(tmp_path, monkeypatch):
    data = _data(tmp_path)
    trajs = load_trajectories(data).trajectories
    out = tmp_path / "dist"
    pcfg = C.teacher_pipeline("labels")
    C.collect(data, out, C.label_teacher(trajs), pcfg, C.CollectConfig(val_fraction=0.0), progress=False)
    lines = (out / "collected.jsonl").read_text().splitlines(keepends=True)
    (out / "collected.jsonl").write_text("".join(lines[:10]))
    parsed = []
    real_loads = json.loads
    monkeypatch.setattr(C.json, "loads", lambda s, *a, **k: parsed.append(s) or real_loads(s, *a, **k))
    done = C.read_ids(out / "collected.jsonl")
    assert len(done) == 10 and parsed and not [p for p in parsed if p.lstrip().startswith("{")]  # ids, no line
    monkeypatch.undo()
    teacher = C.label_teacher(trajs)
    asked = []
    generate = teacher.generate
    teacher.generate = lambda reqs, **kw: asked.extend(r.tag for r in reqs if r.kind == "verify") or generate(reqs,
                                                                                                            **kw)
    man = C.collect(data, out, teacher, pcfg, C.CollectConfig(val_fraction=0.0), resume=True, progress=False)
    assert man["this_run"]["resumed_past"] == 10 and man["this_run"]["collected"] == N - 10
    assert sorted(asked) == sorted(t.id for t in trajs[10:])
    assert man["counts"]["collected"] == N


def _reference_split(records, val_tasks, seed):
    """The split and balancing as finalize made them from the whole list (before it streamed)."""
    import random
    from collections import defaultdict

    train = [r for r in records if r["task_id"] not in val_tasks]
    by = defaultdict(list)
    for r in train:
        by[r["verify"]["verdict"]["score"]].append(r)
    k = min(len(x) for x in by.values())
    rng = random.Random(seed)
    keep = {r["id"] for x in by.values() for r in rng.sample(x, k)}
    return [r["id"] for r in train if r["id"] in keep], [r["id"] for r in records if r["task_id"] in val_tasks]


def test_finalize_reads_the_collected_file_line_by_line_and_balances_as_the_list_did(tmp_path):
    from adaptrubric_local.distill import records as R

    recs = [{"id": f"c{i}", "task_id": f"task{i % 7}", "verify": {"verdict": {"score": int(i % 3 == 0)},
             "p_success": 0.5 if i % 2 else None}} for i in range(60)]
    out = tmp_path / "dist"
    out.mkdir()
    write_jsonl(out / "collected.jsonl", recs)
    write_jsonl(out / "rejected.jsonl", [{"id": "c1", "reason": "unparsed"}, {"id": "z", "reason": "truncated"},
                                         {"id": "z", "reason": "unparsed"}])
    tasks = sorted({r["task_id"] for r in recs})
    for seed in (0, 5):
        m = R.finalize(out, tasks, 0.3, seed, True, {})
        train, val = _reference_split(recs, R.split_tasks(tasks, 0.3, seed), seed)
        assert [json.loads(x)["id"] for x in open(out / "train.jsonl")] == train
        assert [json.loads(x)["id"] for x in open(out / "val.jsonl")] == val
        c = m["counts"]
        assert (c["train"], c["val"], c["collected"], c["with_p_success"]) == (len(train), len(val), 60, 30)
        assert c["train_positive"] * 2 == c["train"] and c["unparsed"] == 1 and c["truncated"] == 0  # z: its last
