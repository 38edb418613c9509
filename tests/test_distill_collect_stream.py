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
    for name in ("adaptrubric_local.formats.load_trajectories", "adaptrubric_local.scoring.read_done_ids"):
        monkeypatch.setattr(name, _refuse)
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
