"""Exact-output tests for the verdict-file helpers of scoring.py: torn-tail repair, last line per
id, error ids, the settings that decide verdicts, and the resume check."""
import json

import pytest

from adaptrubric_local import scoring
from adaptrubric_local.formats.base import DataError


def test_torn_tail_is_cut_at_the_last_newline(tmp_path):
    p = tmp_path / "v.jsonl"
    p.write_bytes(b'{"id": "a"}\n{"id": "b"}\n{"id": "c", "sco')
    assert scoring.repair_torn_tail(p) == b'{"id": "a"}\n{"id": "b"}\n'
    assert p.read_bytes() == b'{"id": "a"}\n{"id": "b"}\n'
    p.write_bytes(b'{"id": "a"}\n')
    assert scoring.repair_torn_tail(p) == b'{"id": "a"}\n' and p.read_bytes() == b'{"id": "a"}\n'
    p.write_bytes(b'{"id": "torn')
    assert scoring.repair_torn_tail(p) == b"" and p.read_bytes() == b""
    p.write_bytes(b'{"id": "a"}\nXX\nXX')  # whatever the torn line holds, it is cut
    assert scoring.repair_torn_tail(p) == b'{"id": "a"}\nXX\n' and p.read_bytes() == b'{"id": "a"}\nXX\n'
    p.write_bytes(b"")
    assert scoring.repair_torn_tail(p) == b""


def test_read_last_lines(tmp_path):
    p = tmp_path / "v.jsonl"
    assert scoring.read_last_lines(p) == {}
    p.write_text('{"id": 1, "score": 0}\n\n{"id": "é", "score": 1}\n{"id": "1", "score": 1}\n{"id": "x"')
    assert scoring.read_last_lines(p) == {"1": {"id": "1", "score": 1}, "é": {"id": "é", "score": 1}}
    p.write_text('{"id": "a"}\n\n{"no_id": 1}\n')
    with pytest.raises(ValueError) as ei:
        scoring.read_last_lines(p)
    assert str(ei.value) == f"{p}: line 3 is not a verdict line; cannot resume into it"
    p.write_text('[1]\n')
    with pytest.raises(ValueError, match="line 1 is not"):
        scoring.read_last_lines(p)
    p.write_text('{"id": "a", "status": "error"}\n{"id": "b", "status": "ok"}\n')
    assert scoring.read_done_ids(p) == {"a", "b"}
    assert scoring.read_done_ids(p, retry_errors=True) == {"b"}


def test_error_id():
    assert scoring.error_id(DataError("/d/data.jsonl", "bad", "line 3", "steps", record_id="t7")) == "t7"
    assert scoring.error_id(DataError("/d/data.jsonl", "bad", "line 3", "steps")) == "data.jsonl:line 3"
    assert scoring.error_id(DataError("/d/data.jsonl", "bad")) == "data.jsonl"

    class Plain:
        file, record = "/d/x.json", None
    assert scoring.error_id(Plain()) == "x.json"


def test_verdict_settings_and_diff():
    meta = {"router": "model", "batch_size": 4, "created": "now", "forced_resumes": [1], "data": "d",
            "engine": {"model": "m", "max_batch_size": 8, "dtype": "bf16"}, "fine": True}
    assert scoring.verdict_settings(meta) == {"router": "model", "engine.model": "m", "engine.dtype": "bf16",
                                              "fine": True}
    assert scoring.verdict_settings({"engine": None}) == {"engine": None}
    new = {**meta, "router": "rules", "batch_size": 1, "engine": {"model": "m2", "max_batch_size": 1}, "extra": 1}
    del new["fine"]
    assert scoring.settings_diff(meta, new) == [
        "engine.dtype: 'bf16' -> None", "engine.model: 'm' -> 'm2'", "extra: None -> 1", "fine: True -> None",
        "router: 'model' -> 'rules'"]
    assert scoring.settings_diff(meta, {**meta, "data": "other", "created": "later"}) == []


def test_check_resume(tmp_path, monkeypatch):
    out = tmp_path / "v.jsonl"
    meta = {"router": "model", "data": "new.jsonl"}
    assert scoring.check_resume(out, meta, False) is meta
    side = scoring.sidecar(out, "config")
    assert side == tmp_path / "v.config.json"
    side.write_text(json.dumps({"router": "model", "data": "old.jsonl", "note": None}))
    assert scoring.check_resume(out, meta, False) == {"router": "model", "data": "new.jsonl", "note": None}
    assert scoring.check_resume(out, {"router": "model"}, False) == {"router": "model", "data": "old.jsonl",
                                                                      "note": None}
    other = {"router": "rules", "fine": False}
    with pytest.raises(ValueError) as ei:
        scoring.check_resume(out, other, False)
    assert str(ei.value) == (f"--resume: {out} was begun with other settings (fine: None -> False; router: "
                             "'model' -> 'rules'). Use the original flags, write to a new --out, or pass "
                             "--force-settings to mix them (recorded in v.config.json)")
    kept = scoring.check_resume(out, other, True)
    assert kept["router"] == "model" and kept["data"] == "old.jsonl"
    (rec,) = kept["forced_resumes"]
    assert set(rec) == {"at", "differences"} and isinstance(rec["at"], str) and len(rec["at"]) == 19
    assert rec["differences"] == ["fine: None -> False", "router: 'model' -> 'rules'"]
