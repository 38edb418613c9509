"""`score --shard I/N` and `merge-shards` (shards.py): the shards of a data set and their merge."""
from __future__ import annotations

import json

import pytest
from stream_support import COUNTS, _data, _lines, _pipe

from adaptrubric_local.formats.stream import Shard
from adaptrubric_local.scale_out.shards import ShardError, merge_shards
from adaptrubric_local.scoring import score_file


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


def test_the_command_line_merges_shards_of_data_given_first(tmp_path, capsys):
    from adaptrubric_local.cli import main

    data = _data(tmp_path, n_tasks=2, candidates=2)
    parts = [tmp_path / f"s{i}.jsonl" for i in (1, 2)]
    for i, p in enumerate(parts, start=1):
        score_file(_pipe(), data, p, progress=False, shard=Shard(i, 2))
    capsys.readouterr()
    assert main(["merge-shards", str(data), "--shards", *map(str, parts), "--out", str(tmp_path / "m.jsonl")]) == 0
    summary = json.loads(capsys.readouterr().out)  # stdout is the summary alone
    assert summary["n"] == sum(len(_lines(p)) for p in parts) and len(_lines(tmp_path / "m.jsonl")) == summary["n"]
    with pytest.raises(SystemExit):  # the data set is required: the merge checks the shards cover it
        main(["merge-shards", "--shards", *map(str, parts), "--out", str(tmp_path / "m2.jsonl")])


def _own_pipe():
    """Routed by the rules, no cues: each trajectory's calls are its own (no batch shares a call), and
    the verifier fails on the candidates c1 of tasks t001 and t004 (error lines that cost calls)."""
    from adaptrubric_local.dry_run import FakeEngine
    from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig

    def fail(req):
        return "overloaded" if req.kind == "verify" and any(f"t00{k}_c1" in p for p in req.images
                                                            for k in (1, 4)) else None

    return AdaptRubric(FakeEngine(fail=fail), PipelineConfig(router="rules", fine=False, trajectories_per_batch=4))


def test_merged_shards_with_bad_records_and_error_lines_give_one_runs_summary(tmp_path):
    data = _data(tmp_path)  # a bad record and a repeated id: error lines without calls
    one = score_file(_own_pipe(), data, tmp_path / "one.jsonl", progress=False)
    parts = [tmp_path / f"s{i}.jsonl" for i in range(1, 4)]
    for i, p in enumerate(parts, start=1):
        score_file(_own_pipe(), data, p, progress=False, shard=Shard(i, 3))
    merged = merge_shards(parts, tmp_path / "m.jsonl", data=data)
    assert one["errors"] == 4 and one["error_calls"] > 0  # 2 bad records, 2 failed verifier calls
    timing = {"seconds", "s_per_traj", "out", "this_run", "merged", "skipped_resume", "retried_errors"}
    assert {k: v for k, v in merged.items() if k not in timing} == {k: v for k, v in one.items() if k not in timing}
    assert _lines(tmp_path / "m.jsonl") == _lines(tmp_path / "one.jsonl")


def test_the_merge_refuses_shards_of_other_data_and_ids_the_data_lacks(tmp_path):
    data = _data(tmp_path, n_tasks=2, candidates=2)
    parts = [tmp_path / f"s{i}.jsonl" for i in (1, 2)]
    for i, p in enumerate(parts, start=1):
        score_file(_pipe(), data, p, progress=False, shard=Shard(i, 2))
    recs = [json.loads(x) for x in data.read_text().splitlines()]
    other = data.with_name("other.jsonl")  # the same ids, other labels
    other.write_text("".join(json.dumps({**r, "label": 1 - r.get("label", 0)}) + "\n" for r in recs))
    with pytest.raises(ShardError, match=rf"s1.jsonl was scored on {data}, whose content differs from {other}"):
        merge_shards(parts, tmp_path / "m.jsonl", data=other)
    copy = tmp_path / "elsewhere" / data.name  # the same data under another path: merged
    copy.parent.mkdir()
    copy.write_bytes(data.read_bytes())
    assert merge_shards(parts, tmp_path / "m.jsonl", data=copy)["n"] == len(recs)

    fewer = data.with_name("fewer.jsonl")  # the data less one record: its id is in a shard
    fewer.write_text("".join(json.dumps(r) + "\n" for r in recs if r.get("id") != "t001_c1"))
    for p in parts:  # shards of an older version, which recorded the data's path only
        cfg = p.with_suffix(".config.json")
        meta = json.loads(cfg.read_text())
        meta.pop("data_fingerprint")
        cfg.write_text(json.dumps({**meta, "data": str(fewer)}))
    with pytest.raises(ShardError, match=rf"s\d.jsonl holds 1 id\(s\) that {fewer} does not have \(e.g. t001_c1\)"):
        merge_shards(parts, tmp_path / "m2.jsonl", data=fewer)
    with pytest.raises(ShardError, match=rf"s1.jsonl was scored on {fewer}, not on {data}"):
        merge_shards(parts, tmp_path / "m2.jsonl", data=data)
