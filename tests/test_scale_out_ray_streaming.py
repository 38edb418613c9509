"""Ray scoring takes its trajectories from `score_with`'s stream a window at a time (ray_scoring.py:
`iter_ready`, `windowed_chunks`), not as one list: checked without Ray, the replicas' side replaced by
one that answers each chunk as it is sent (the real pool is tests/test_scale_out_ray.py's)."""
from itertools import count

from adaptrubric_local.pipeline import PipelineConfig
from adaptrubric_local.scale_out.ray import RayConfig, ReplicaPool, _Chunk, chunks, windowed_chunks
from adaptrubric_local.scoring import score_with
from adaptrubric_local.synth import synthesize
from adaptrubric_local.types import Step, Trajectory, Verdict


def traj(i: str, ins: str) -> Trajectory:
    return Trajectory(id=i, instruction=ins, steps=[Step(screenshot="x.png", action="tap")])


def test_windowed_chunks_read_the_stream_as_chunks_are_asked_for():
    taken = count()
    ts = [traj(f"t{k}", f"I{k // 3}") for k in range(40)]

    def stream():
        for t in ts:
            next(taken)
            yield t

    it = stream()
    first = [next(it) for _ in range(8)]
    got = windowed_chunks(first, it, 8, 4)
    c = next(got)
    assert isinstance(c, _Chunk) and next(taken) == 8  # nothing read past the first window yet
    rest = [c, *got]
    assert [t.id for ch in rest for t in ch.trajs] == [t.id for t in ts]
    assert [[t.id for t in ch.trajs] for ch in rest[:3]] == [[t.id for t in x] for x in chunks(ts[:8], 4)]


def test_score_with_hands_the_pool_its_stream_chunk_by_chunk(tmp_path, monkeypatch):
    data = synthesize(tmp_path / "d", n_tasks=10, candidates=3, size=(60, 120))
    pool = ReplicaPool(PipelineConfig(trajectories_per_batch=2), {"model": "m"}, RayConfig(replicas=1))
    read, at_first = [], []
    monkeypatch.setattr(pool, "_start", lambda: None)
    monkeypatch.setattr(pool, "close", lambda: None)

    def run(pending, source):  # one replica answering each chunk when it is sent
        for chunk in source:
            at_first.append(len(read)) if not at_first else None
            yield from (Verdict(id=t.id, status="ok", score=1, p_success=0.9) for t in chunk.trajs)

    monkeypatch.setattr(pool, "_run", run)
    import adaptrubric_local.formats.stream as S

    parse = S.canonical.parse_record
    monkeypatch.setattr(S.canonical, "parse_record", lambda obj, *a, **k: read.append(obj["id"]) or parse(obj, *a, **k))
    summary = score_with(pool, {"model": "m"}, data, tmp_path / "v.jsonl", progress=False)
    assert summary["n"] == len(read) == 30
    assert at_first[0] <= 8 < 30  # the first chunk went out after one window (4 x 1 replica x 2) was read
    assert len((tmp_path / "v.jsonl").read_text().splitlines()) == 30
