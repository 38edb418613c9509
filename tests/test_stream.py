"""Streaming scoring (formats/stream.py, formats/ids.py, scoring.score_with): records read as the scorer
asks, a resume from ids only, the compact id set."""
from __future__ import annotations

import json

from stream_support import COUNTS, _data, _lines, _pipe

from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.formats.ids import IdSet
from adaptrubric_local.formats.stream import stream_trajectories
from adaptrubric_local.scoring import score_file


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
    s = IdSet.of([*ids, "t1"])
    assert all(i in s for i in ids) and "u1" not in s and len(s) == 5000
    assert s.is_repeated("t1") and not s.is_repeated("t2") and s.repeated_count() == 1
