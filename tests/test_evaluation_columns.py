"""`eval` over columns (evaluation/columns.py) against `eval` over Verdict objects."""
from __future__ import annotations

import json

import pytest
from stream_support import _data

from adaptrubric_local.dry_run import FakeEngine
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.scoring import score_file


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


def test_eval_over_columns_holds_few_bytes_a_verdict(tmp_path):
    """The columns are built without copies and deduplicated only when an id repeats: peak traced memory of
    the metrics of 20,000 verdict lines stays under 220 bytes a line (copying the columns while freezing,
    deduplicating and aligning them, it was over 330)."""
    import tracemalloc

    from adaptrubric_local.evaluation import columns

    path, n = tmp_path / "v.jsonl", 20000
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"t{i:07d}", "status": "ok", "score": i % 2, "label": (i // 3) % 2,
                                 "p_success": (i % 97) / 97, "cost_tokens": 10.0, "cost_calls": 3.0}) + "\n")
    tracemalloc.start()
    try:
        m, _, _ = columns.metrics(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert m["overall"]["n"] == n and m["probability"]["p_success"]["n"] == n
    assert peak / n < 220, f"{peak / n:.0f} bytes a verdict line"


def _index(folder):
    text = (folder / "review_files" / "index.js").read_text()
    return json.loads(text[text.index("=") + 1:].strip().rstrip(";"))


def test_eval_of_a_large_run_pages_a_sample_it_names(tmp_path):
    """A run of more verdicts than --review-cards gets a page of that many cards (the same ids whatever the
    lines' order), saying how many of how many; the metrics are those of every verdict."""
    from adaptrubric_local.cli import main
    from adaptrubric_local.evaluation.harness import run_eval

    data = _data(tmp_path, n_tasks=4, candidates=2)
    out = tmp_path / "v.jsonl"
    score_file(AdaptRubric(FakeEngine(), PipelineConfig(router="model")), data, out, progress=False)
    whole = run_eval(out, tmp_path / "all", data, review=True, allow_extra=True, review_cards=0)
    assert _index(tmp_path / "all")["n"] >= whole["coverage"]["verdicts"] == 10 and "review_cards" not in whole
    few = run_eval(out, tmp_path / "few", data, review=True, allow_extra=True, review_cards=4)
    page = _index(tmp_path / "few")
    assert page["n"] == 4 and few["review_cards"] == {"shown": 4, "of": 10, "sample_seed": 42}
    assert any("shows 4 of the 10 verdicts" in n for n in page["notes"])
    assert few["overall"] == whole["overall"]
    lines = out.read_text().splitlines()
    out.write_text("\n".join(reversed(lines)) + "\n")
    assert main(["eval", str(data), "--verdicts", str(out), "--out", str(tmp_path / "cli"), "--quiet",
                 "--allow-extra", "--review-cards", "4"]) == 0
    assert sorted(r[0] for r in _index(tmp_path / "cli")["rows"]) == sorted(r[0] for r in page["rows"])
