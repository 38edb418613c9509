"""The verdict table (evaluation/verdict_table.py) and the figures of `eval` computed from it, against
values worked out by hand; one path whatever the size of the verdict file."""
from __future__ import annotations

import json

import pytest
from stream_support import labelled_case, truth

from adaptrubric_local.cli import main
from adaptrubric_local.evaluation import harness, metrics, verdict_table
from adaptrubric_local.evaluation.harness import run_eval
from adaptrubric_local.formats.ids import digest
from adaptrubric_local.labels import LabelsError

from conftest import canonical_record, write_jsonl


def _case(tmp_path):
    """Five trajectories and a record that does not load; verdicts for four of them (one retried), for the
    bad record, for an id no longer in the data (a stale error) and for one never in it (extra)."""
    recs = [canonical_record(tmp_path, "a", 2, label=1, platform="android", task_id="T1"),
            canonical_record(tmp_path, "b", 2, label=0, platform="android", task_id="T1"),
            canonical_record(tmp_path, "c", 2, label=1, platform="web", task_id="T2"),
            canonical_record(tmp_path, "d", 2, label=0, platform="web", task_id="T2"),
            canonical_record(tmp_path, "e", 2, platform="android"),
            {"id": "broken", "instruction": "x", "steps": "not a list"}]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    own = {"prompt_tokens": 100, "completion_tokens": 10}
    lines = [{"id": "a", "status": "ok", "score": 1, "p_success": 0.9, "cost_tokens": 300.0, "cost_calls": 2.0},
             {"id": "b", "status": "error", "error": "boom"},
             {"id": "c", "status": "unparsed", **own},
             {"id": "b", "status": "ok", "score": 1, "p_success": 0.6, **own},  # the retry: the last line wins
             {"id": "e", "status": "ok", "score": 1, "p_success": 0.8, "label": 0, **own},
             {"id": "broken", "status": "error", "label": 1},
             {"id": "gone", "status": "error"},
             {"id": "x", "status": "ok", "score": 0, "label": 1}]
    return data, write_jsonl(tmp_path / "v.jsonl", lines)


def test_eval_figures_by_hand(tmp_path):
    data, vfile = _case(tmp_path)
    with pytest.raises(ValueError, match=r"1 id\(s\) that are not in .* \(first: x\)"):
        run_eval(vfile, tmp_path / "strict", data, review=False)
    m = run_eval(vfile, tmp_path / "e", data, review=False, allow_extra=True)
    # labelled: a (1, predicted 1), b (0, 1), c (1, unparsed: 0), d (0, missing: 0); e and broken unlabelled
    o = m["overall"]
    assert (o["n"], o["scored"], o["unparsed"], o["errors"], o["missing"], o["positives"]) == (4, 2, 1, 0, 1, 2)
    assert o["confusion"] == {"tp": 1, "fp": 1, "tn": 1, "fn": 1} and o["unanswered_as_fail"] == {"fn": 1, "tn": 1}
    assert (o["acc"], o["prec"], o["rec"], o["f1"], o["fpr"], o["acc_strict"]) == (50.0, 50.0, 50.0, 50.0, 50.0, 25.0)
    s = o["scored_only"]
    assert (s["n"], s["acc"], s["prec"], s["rec"], s["fpr"]) == (2, 50.0, 50.0, 100.0, 100.0)
    assert s["f1"] == pytest.approx(200 / 3) and m["unlabelled"] == 2
    web = m["per_platform"]["web"]
    assert set(m["per_platform"]) == {"android", "web"} and m["per_platform"]["android"]["confusion"]["fp"] == 1
    assert (web["n"], web["prec"], web["rec"], web["f1"], web["fpr"]) == (2, None, 0.0, None, 0.0)
    p = m["probability"]["p_success"]
    assert list(m["probability"]) == ["p_success"]
    assert (p["n"], p["positives"], p["auroc"], p["auprc"]) == (2, 1, 1.0, 1.0)
    assert p["brier"] == pytest.approx((0.1 ** 2 + 0.6 ** 2) / 2) and p["ece"] == pytest.approx(0.35)
    assert p["without_probability"] == 1 and p["statuses"] == {"ok": 2}  # c: labelled, no probability
    assert [(r["lo"] * 15, r["n"]) for r in p["reliability"]] == [(pytest.approx(9), 1), (pytest.approx(13), 1)]
    c = m["coverage"]
    assert (c["trajectories"], c["verdicts"], c["covered"], c["evaluated"]) == (6, 6, 5, 6)
    assert (c["missing"], c["extra"], c["stale_errors"], c["not_loaded"]) == (["d"], ["x"], ["gone"], ["broken"])
    assert c["missing_labelled"] == 1 and c["not_loaded_verdicts"] == 1
    e = m["efficiency"]  # answered: a (its cost fields), b, c, e (their own call: 110 tokens, one call)
    assert (e["trajectories"], e["tokens"], e["calls"], e["errors"], e["error_calls"]) == (4, 630.0, 5.0, 1, 0.0)
    assert e["accounting"] == "mixed: 1 of 4 verdicts carry all model calls, the rest the verifier's only"
    alone = run_eval(vfile, tmp_path / "alone", review=False)  # no data: the lines' own labels
    # labelled lines: e (label 0, score 1), broken (1, an error), x (1, score 0)
    assert alone["coverage"]["labels"] == "verdicts" and alone["overall"]["n"] == 3
    assert alone["overall"]["confusion"] == {"tp": 0, "fp": 1, "tn": 0, "fn": 2}
    verdicts = {str(v.id): v for v in harness.load_verdicts(vfile)}
    assert len(verdicts) == 7 and verdicts["b"].status == "ok" and list(verdicts)[:3] == ["a", "b", "c"]


def test_a_small_and_a_large_file_go_through_the_same_code(tmp_path, monkeypatch):
    """No size switch: a 10-line and a 100,000-line verdict file are read into the table, and every figure
    computed from it, by the same functions, once each; only the review page's cards are a sample."""
    calls = []
    for module, name in ((verdict_table, "read"), (harness, "by_platform"), (harness, "probabilities"),
                         (harness, "costs")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    pages = {}
    for n in (10, 100_000):
        path = tmp_path / f"v{n}.jsonl"
        with open(path, "w") as fh:
            fh.writelines(json.dumps({"id": f"t{i}", "status": "ok", "score": i % 2, "label": (i // 2) % 2,
                                      "p_success": (i % 10) / 10}) + "\n" for i in range(n))
        calls.clear()
        m = run_eval(path, tmp_path / f"e{n}", review=True, review_cards=20)
        assert calls == ["read", "by_platform", "probabilities", "costs"] and m["overall"]["n"] == n
        pages[n] = m.get("review_cards")
    assert pages == {10: None, 100_000: {"shown": 20, "of": 100_000, "sample_seed": 42}}
    assert not hasattr(harness, "more_lines") and not hasattr(harness.sample, "more_lines")


def test_the_table_holds_few_bytes_a_verdict(tmp_path):
    """The columns are built without copies and deduplicated as they are read: peak traced memory of the
    metrics of 20,000 verdict lines stays under 160 bytes a line."""
    import tracemalloc

    path, n = tmp_path / "v.jsonl", 20000
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"t{i:07d}", "status": "ok", "score": i % 2, "label": (i // 3) % 2,
                                 "p_success": (i % 97) / 97, "cost_tokens": 10.0, "cost_calls": 3.0}) + "\n")
    tracemalloc.start()
    try:
        t = verdict_table.read(path)
        m = metrics.by_platform(t.rows, t.table.platforms)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert m["overall"]["n"] == n
    assert peak / n < 160, f"{peak / n:.0f} bytes a verdict line"


def _index(folder):
    text = (folder / "review_files" / "index.js").read_text()
    return json.loads(text[text.index("=") + 1:].strip().rstrip(";"))


def test_a_large_run_pages_a_sample_it_names(tmp_path):
    """A run of more verdicts than --review-cards gets a page of that many cards (the same ids whatever the
    lines' order), saying how many of how many; the metrics are those of every verdict."""
    data, vfile = _case(tmp_path)
    whole = run_eval(vfile, tmp_path / "all", data, allow_extra=True, review_cards=0)
    assert sorted(r[0] for r in _index(tmp_path / "all")["rows"]) == ["a", "b", "broken", "c", "d", "e"]
    assert "review_cards" not in whole
    few = run_eval(vfile, tmp_path / "few", data, allow_extra=True, review_cards=3)
    page = _index(tmp_path / "few")
    assert page["n"] <= 3 and few["review_cards"] == {"shown": page["n"], "of": 6, "sample_seed": 42}
    assert any(f"shows {page['n']} of the 6 verdicts" in n for n in page["notes"])
    assert few["overall"] == whole["overall"]
    vfile.write_text("".join(reversed(vfile.read_text().splitlines(keepends=True))))
    assert main(["eval", str(data), "--verdicts", str(vfile), "--out", str(tmp_path / "cli"), "--quiet",
                 "--allow-extra", "--review-cards", "3"]) == 0
    assert {r[0] for r in _index(tmp_path / "cli")["rows"]} <= {"a", "b", "broken", "c", "d", "e"}


def test_labels_files_on_the_table_by_hand(tmp_path):
    data, vfile, files = labelled_case(tmp_path)
    said = []
    t = verdict_table.read(vfile, data, labels=files, log=said.append)
    got = t.labels
    assert got.not_loaded == ["broken"] and (got.filled, got.overridden, got.confirmed, got.unsure) == (5, 6, 1, 1)
    assert said[0].startswith(f"warning: 1 of 61 record(s) of {data} did not load") and said[1] == got.summary()
    m = run_eval(vfile, tmp_path / "e", data, review=False, labels_files=files)
    assert m["run"]["labels"] == got.record() and m["coverage"]["not_loaded"] == ["broken"]
    assert "t58" in t.coverage.missing  # a later unsure line never replaces a 0/1
    row = t.coverage.evaluated - len(t.coverage.missing) + t.coverage.missing.index("t58")
    assert t.rows["label"][row] == 1 - truth(58)


def test_labels_errors(tmp_path):
    data, vfile, files = labelled_case(tmp_path)
    stray = write_jsonl(tmp_path / "stray.jsonl", [{"id": "t1", "label": 1}]
                        + [{"id": f"nope{k}", "label": 0} for k in range(6)])
    for paths in ([stray], [files[0], stray]):
        with pytest.raises(LabelsError, match=f"{stray}: line 2: id 'nope0' is not in {data} "
                                              r"\(and 5 more: nope1, nope2, nope3, ...\)"):
            verdict_table.read(vfile, data, labels=paths)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "t1", "label": 1}\n{"id": "t2", "label": "yes"}\n')
    with pytest.raises(LabelsError, match=f"{bad}: line 2, field 'label': must be 0, 1 or null"):
        verdict_table.read(vfile, tmp_path / "no-such-data", labels=[bad])  # before the data is read
    with pytest.raises(ValueError, match="--labels needs DATA"):
        run_eval(vfile, tmp_path / "e", None, review=False, labels_files=files)
    assert verdict_table.read(vfile, data, labels=[]).labels is None


def test_a_verdict_file_that_is_not_one(tmp_path):
    path = write_jsonl(tmp_path / "v.jsonl", [{"id": "a", "status": "ok"}, {"id": "b"}])
    with pytest.raises(ValueError, match=f"{path}: the line of id 'b' is not a verdict line \\(needs 'status'\\)"):
        verdict_table.read(path)
    path.write_text('{"id": "a", "status": "ok"}\n[1, 2]\n')
    with pytest.raises(ValueError, match=f"{path}: line 2 is not a verdict line"):
        verdict_table.read(path)
    with pytest.raises(FileNotFoundError):
        verdict_table.read(tmp_path / "none.jsonl")


def test_tts_groups_the_table_by_the_data_s_task_by_hand(tmp_path):
    """The task of a row is the data's task_id, else its instruction; the platform stays the platform."""
    recs = [canonical_record(tmp_path, "a", 2, label=1, platform="android", task_id="T1"),
            canonical_record(tmp_path, "b", 2, label=0, platform="web", task_id="T1"),
            canonical_record(tmp_path, "c", 2, label=0, platform="web", instruction="Open the app."),
            canonical_record(tmp_path, "d", 2, label=1, platform="web", instruction="Open the app.")]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    vfile = write_jsonl(tmp_path / "v.jsonl", [
        {"id": "a", "status": "ok", "score": 1}, {"id": "b", "status": "ok", "score": 0, "task_id": "T9"},
        {"id": "c", "status": "ok", "score": 0}, {"id": "d", "status": "unparsed"}])
    res = harness.run_tts(vfile, tmp_path / "t", data, seed=None)  # candidates in id order: [a, b], [c, d]
    assert res["earlystop"] == {1: 50.0, 2: 100.0}  # T1: a; T2: c, then d (no predicted success: the last)
    assert res["bestofn"] == {1: 50.0, 2: 50.0} and res["oracle"] == {1: 50.0, 2: 100.0}  # T2's best: c (0)
    assert res["random"] == {1: 50.0, 2: 50.0}
    assert (res["pool"]["tasks"], res["pool"]["mixed"], res["pool"]["scored"], res["pool"]["unparsed"]) == (2, 2, 3, 1)
    assert res["classification"]["n"] == 4 and res["classification"]["unparsed"] == 1
    t = verdict_table.read(vfile, data, candidates=True)
    codes = [t.table.tasks[digest(k)] for k in ("T1", "T1", "instruction: Open the app.", "instruction: Open the app.")]
    assert t.rows["task"].tolist() == codes  # the data's, not the verdict line's T9
    assert [t.table.platforms[p] for p in ("android", "web", "web", "web")] == t.rows["platform"].tolist()
