"""Streaming scoring (formats/stream.py, verdict_file.py, shards.py): records read as the scorer asks,
resume from ids only, `--shard I/N` and its merge."""
from __future__ import annotations

import json

import pytest

from adaptrubric_local.dry_run import FakeEngine
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.formats.ids import IdSet
from adaptrubric_local.formats.stream import Shard, stream_trajectories
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.scoring import score_file
from adaptrubric_local.shards import ShardError, merge_shards
from adaptrubric_local.synth import synthesize

# what depends on which trajectories share a batch (router and cue calls are shared out over a batch)
BATCH_COSTS = ("cost_calls", "cost_tokens")


def _data(tmp_path, n_tasks=6, candidates=3):
    data = synthesize(tmp_path / "d", n_tasks=n_tasks, candidates=candidates, size=(90, 200))
    with open(data, "a") as fh:  # a bad record (missing screenshot) and a repeated id
        fh.write(json.dumps({"id": "bad", "instruction": "x", "steps": [{"screenshot": "nope.png"}]}) + "\n")
        fh.write(open(data).readline())
    return data


def _pipe():
    return AdaptRubric(FakeEngine(), PipelineConfig(router="model", trajectories_per_batch=4))


def _lines(path):
    out = {}
    for line in open(path):
        d = json.loads(line)
        out[d["id"]] = {k: v for k, v in d.items() if k not in BATCH_COSTS}
    return out


# the summary's counts; its cost figures depend on which trajectories shared a batch (BATCH_COSTS), which a
# shard or a resume changes
COUNTS = ("n", "scored", "unparsed", "errors", "positives", "hit_cap", "hit_context")


def test_four_shards_and_their_merge_give_the_verdicts_of_one_run(tmp_path):
    data = _data(tmp_path)
    one = score_file(_pipe(), data, tmp_path / "one.jsonl", progress=False)
    parts = [tmp_path / f"s{i}.jsonl" for i in range(1, 5)]
    for i, p in enumerate(parts, start=1):
        s = score_file(_pipe(), data, p, progress=False, shard=Shard(i, 4))
        assert s["shard"] == f"{i}/4" and json.loads(p.with_suffix(".config.json").read_text())["shard"] == f"{i}/4"
    sizes = [sum(1 for _ in open(p)) for p in parts]
    assert sum(sizes) == one["n"] == 20 and max(sizes) - min(sizes) <= 1
    merged = merge_shards(list(reversed(parts)), tmp_path / "m.jsonl", data=data)
    assert _lines(tmp_path / "m.jsonl") == _lines(tmp_path / "one.jsonl")
    assert {k: merged[k] for k in COUNTS} == {k: one[k] for k in COUNTS}
    assert "shard" not in json.loads((tmp_path / "m.config.json").read_text())


def test_the_merge_refuses_shards_that_do_not_cover_the_data_once(tmp_path):
    data = _data(tmp_path, n_tasks=2, candidates=2)
    parts = [tmp_path / f"s{i}.jsonl" for i in range(1, 4)]
    for i, p in enumerate(parts, start=1):
        score_file(_pipe(), data, p, progress=False, shard=Shard(i, 3))
    with pytest.raises(ShardError, match=r"shard\(s\) 2/3 missing"):
        merge_shards([parts[0], parts[2]], tmp_path / "m.jsonl")
    with pytest.raises(ShardError, match="given twice"):
        merge_shards([parts[0], parts[0], parts[1], parts[2]], tmp_path / "m.jsonl")
    lines = parts[1].read_text().splitlines()
    parts[1].write_text("\n".join(lines[:-1]) + "\n")  # shard 2 unfinished
    with pytest.raises(ShardError, match="have no verdict in any shard"):
        merge_shards(parts, tmp_path / "m.jsonl", data=data)
    with open(parts[1], "a") as fh:  # an id of shard 1 in shard 2 too
        fh.write(open(parts[0]).readline())
    with pytest.raises(ShardError, match="in more than one shard"):
        merge_shards(parts, tmp_path / "m.jsonl")
    assert not (tmp_path / "m.jsonl").exists()


def test_shard_parse_says_the_form():
    assert str(Shard.parse("2/4")) == "2/4" and [p for p in range(9) if Shard(2, 4).takes(p)] == [1, 5]
    for bad in ("2", "0/4", "5/4", "a/b"):
        with pytest.raises(ValueError, match="I/N|1 <= I <= N"):
            Shard.parse(bad)


def test_the_stream_gives_what_the_loader_gives(tmp_path):
    data = _data(tmp_path, n_tasks=3, candidates=2)
    loaded = load_trajectories(data)
    stream = stream_trajectories(data)
    items = [x for _, x in stream.items()]
    assert [t.to_dict() for t in items if not isinstance(t, Exception)] == [t.to_dict() for t in loaded.trajectories]
    assert sorted(map(str, (x for x in items if isinstance(x, Exception)))) == sorted(map(str, loaded.errors))
    assert stream.records == 8 and len(stream.ids) == 7 and stream.repeated(loaded.trajectories[0].id)


def test_a_resume_skips_done_lines_without_parsing_them_and_counts_as_one_run(tmp_path, monkeypatch):
    data = _data(tmp_path)
    whole = score_file(_pipe(), data, tmp_path / "whole.jsonl", progress=False)
    out = tmp_path / "v.jsonl"
    score_file(_pipe(), data, out, progress=False)
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:7]) + "\n" + lines[7][:30])  # 7 lines and a torn one: killed by SIGKILL,
    out.with_suffix(".summary.json").unlink()  # before any summary was written
    from adaptrubric_local.formats import canonical

    parsed = []
    real = canonical.parse_record
    monkeypatch.setattr(canonical, "parse_record",
                        lambda obj, *a, **k: parsed.append(obj.get("id")) or real(obj, *a, **k))
    resumed = score_file(_pipe(), data, out, resume=True, progress=False)
    done = {json.loads(x)["id"] for x in lines[:7]}
    repeated = open(data).readline() and json.loads(open(data).readline())["id"]
    assert not (set(parsed) & done) - {repeated, "bad"}  # done records are passed over unparsed
    assert {k: resumed[k] for k in COUNTS} == {k: whole[k] for k in COUNTS}
    assert _lines(out) == {k: v for k, v in _lines(tmp_path / "whole.jsonl").items()}


def test_the_id_set_is_exact_for_ids_with_trailing_nul_digests():
    ids = [f"t{i}" for i in range(5000)]
    s = IdSet.of(ids + ["t1"])
    assert all(i in s for i in ids) and "u1" not in s and len(s) == 5000
    assert s.is_repeated("t1") and not s.is_repeated("t2") and s.repeated_count() == 1


def _approx(x):
    if isinstance(x, dict):
        return {k: _approx(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_approx(v) for v in x]
    return pytest.approx(x, rel=1e-12, abs=1e-12) if isinstance(x, float) else x


def test_eval_over_columns_gives_the_metrics_of_eval_over_verdicts(tmp_path):
    """A file with every case coverage.py names: missing verdicts, an extra one, a stale error line, a record
    that did not load, unlabelled trajectories, two platforms, calibrated probabilities, a retried error."""
    from adaptrubric_local.evaluation.harness import run_eval

    data = _data(tmp_path, n_tasks=8, candidates=3)
    lines = data.read_text().splitlines()
    for k in (2, 5):  # unlabelled, and another platform
        d = json.loads(lines[k])
        d.pop("label", None) if k == 2 else d.update(platform="web")
        lines[k] = json.dumps(d)
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "v.jsonl"
    failing = FakeEngine(fail=lambda r: "boom" if r.kind == "verify" and r.tag == "t001_c0" else None)
    score_file(AdaptRubric(failing, PipelineConfig(router="model", trajectories_per_batch=4)), data, out,
               progress=False)
    vl = out.read_text().splitlines()
    extra = json.loads(vl[0]) | {"id": "not-in-data"}
    stale = json.loads(vl[1]) | {"id": "gone", "status": "error", "score": None}
    again = json.loads(vl[3]) | {"p_success_calibrated": 0.25}
    out.write_text("\n".join(vl[4:-3] + [json.dumps(x) for x in (extra, stale, again)]) + "\n")  # 3 missing
    for subset in ("data", "verdicts"):
        old = run_eval(out, tmp_path / f"old-{subset}", data, load_trajectories(data, check_images=False),
                       review=False, subset=subset, allow_extra=True)
        new = run_eval(out, tmp_path / f"new-{subset}", data, review=False, subset=subset, allow_extra=True)
        for m in (old, new):
            m.pop("run")
        assert new["coverage"]["missing"] and new["coverage"]["extra"] == ["not-in-data"]
        assert new["coverage"]["stale_errors"] == ["gone"] and new["coverage"]["not_loaded"]
        assert new["overall"]["errors"] and len(new["per_platform"]) == 2
        assert new["unlabelled"] == (2 if subset == "data" else 0)
        assert "p_success_calibrated" in new["probability"]
        assert new == _approx(old), subset
    without = run_eval(out, tmp_path / "nodata", review=False)
    assert without["coverage"]["labels"] == "verdicts"
    with pytest.raises(ValueError, match="not-in-data"):
        run_eval(out, tmp_path / "strict", data, review=False)
