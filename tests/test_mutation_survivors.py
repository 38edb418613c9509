"""Tests for mutants that survived the mutation run of the core modules: the mixed-task share of the
test-time-scaling pool, the seed reaching the candidate order, and voting over samples without text."""
import json
import shutil
from pathlib import Path

import pytest

from adaptrubric_local import FakeEngine
from adaptrubric_local.bank import DEFAULT_BANK
from adaptrubric_local.cues import manual_cues
from adaptrubric_local.dry_run import pipeline_script as default_script
from adaptrubric_local.evaluation import metrics, tts
from adaptrubric_local.formats import canonical
from adaptrubric_local.formats.base import DataError
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig, vote
from adaptrubric_local.scoring import score_file
from adaptrubric_local.synth import synthesize
from adaptrubric_local.types import RouteResult, Verdict
from adaptrubric_local.verdict import parse_verdict


def V(i, task, label, score=1, status="ok", p=None):
    return Verdict(id=i, task_id=task, label=label, score=score, status=status, p_success=p)


def test_pool_percentages_with_several_mixed_tasks():
    tasks = {"f": [V("f1", "f", 0), V("f2", "f", 0)], "p": [V("p1", "p", 1), V("p2", "p", 1)],
             "m1": [V("a", "m1", 0), V("b", "m1", 1)], "m2": [V("c", "m2", 1), V("d", "m2", 0)]}
    out = tts.pool(tasks, 2)
    assert (out["all_fail"], out["all_pass"], out["mixed"]) == (1, 1, 2)
    assert (out["all_fail_pct"], out["all_pass_pct"], out["mixed_pct"]) == (25.0, 25.0, 50.0)


def test_curves_use_the_given_seed():
    # every candidate is verified 1, so EarlyStop@1 takes the first candidate of the order
    vs = [V(f"c{i}", "t", int(i == 0)) for i in range(6)]
    first_42 = tts.groups(vs, 42)["t"][0]
    assert first_42.id != "c0"  # the seed-42 order does not start with the sorted first candidate
    assert tts.curves(vs, seed=None)["earlystop"][1] == 100.0
    assert tts.curves(vs, seed=42)["earlystop"][1] == 100.0 * first_42.label == 0.0
    assert tts.curves(vs)["earlystop"][1] == 0.0


def test_vote_joins_samples_without_text_as_empty():
    ok = parse_verdict("SCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none")
    ok.raw = "first"
    failed = Verdict(status="error", error="engine failed")  # an error sample has no raw text
    out = vote([ok, failed], "raw")
    assert out.raw == "first\n\n----- sample -----\n"


def test_efficiency_of_one_verdict():
    v = Verdict(status="ok", score=1, cost_tokens=300.0, cost_calls=3.0, n_images=4)
    e = metrics.efficiency([v])
    assert (e["tokens_per_traj"], e["calls_per_traj"], e["images_per_traj"]) == (300.0, 3.0, 4.0)


def test_f1_when_precision_and_recall_sum_to_at_most_one_percent():
    r = metrics.rates({"tp": 1, "fp": 199, "tn": 0, "fn": 199})
    assert (r["prec"], r["rec"], r["f1"]) == (0.5, 0.5, 0.5)


def test_unanswered_counted_as_failures_by_label():
    vs = [Verdict(status="unparsed", label=1), Verdict(status="error", label=0), Verdict(status="error", label=0),
          Verdict(status="ok", score=1, label=1)]
    assert metrics.classification(vs)["unanswered_as_fail"] == {"fn": 1, "tn": 2}


def test_score_file_defaults(tmp_path, capsys):


    data = synthesize(tmp_path / "d", n_tasks=1, candidates=2, size=(90, 200))
    out = tmp_path / "v.jsonl"
    eng = FakeEngine()
    score_file(AdaptRubric(eng, PipelineConfig(router="rules")), data, out)
    assert capsys.readouterr().err  # a progress bar by default
    with pytest.raises(ValueError, match="exists; pass --resume"):  # no resume by default
        score_file(AdaptRubric(eng, PipelineConfig(router="rules")), data, out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 2 and all(x.get("status") == "ok" for x in lines)
    with pytest.raises(ValueError, match="other settings"):  # settings must match unless forced
        score_file(AdaptRubric(eng, PipelineConfig(router="rules", fine=False)), data, out, resume=True)
    # an error line is retried on resume by default
    bad = FakeEngine(fail=lambda r: "boom" if r.kind == "verify" else None)
    out2 = tmp_path / "new" / "dir" / "v2.jsonl"  # missing folders are created
    score_file(AdaptRubric(bad, PipelineConfig(router="rules")), data, out2, progress=False)
    score_file(AdaptRubric(FakeEngine(), PipelineConfig(router="rules")), data, out2, resume=True, progress=False)
    last = {}
    for x in out2.read_text().splitlines():
        d = json.loads(x)
        last[d["id"]] = d["status"]
    assert set(last.values()) == {"ok"}


def test_score_file_passes_the_format_and_prints_loader_warnings_to_stderr(tmp_path, capsys):


    data = Path(synthesize(tmp_path / "d", n_tasks=1, candidates=2, size=(90, 200)))
    folder = data if data.is_dir() else data.parent
    pipe = AdaptRubric(FakeEngine(), PipelineConfig(router="rules"))
    # a verdict file left in the data folder is skipped with a warning on stderr, never on stdout
    score_file(pipe, folder, tmp_path / "v.jsonl", fmt="canonical", progress=False)
    shutil.copy(tmp_path / "v.jsonl", folder / "old_verdicts.jsonl")
    capsys.readouterr()
    summary = score_file(pipe, folder, tmp_path / "v2.jsonl", fmt="canonical", progress=False)
    cap = capsys.readouterr()
    assert summary["n"] == 2
    assert f"warning: {folder / 'old_verdicts.jsonl'}: this looks like a verdict file" in cap.err
    assert "warning" not in cap.out
    # the format given is the one used: the zerogui loader finds nothing in canonical data
    with pytest.raises(DataError, match="the zerogui loader looked for"):
        score_file(pipe, folder, tmp_path / "v3.jsonl", fmt="zerogui", progress=False)


def test_score_file_config_sidecar_names_the_data_and_is_indented(tmp_path):


    class WithStats(FakeEngine):
        @property
        def stats(self):  # what the transformers engine reports about its batches
            return {"batches": 1, "rows": 2}

    data = synthesize(tmp_path / "d", n_tasks=1, candidates=1, size=(90, 200))
    out = tmp_path / "v.jsonl"
    pipe = AdaptRubric(WithStats(), PipelineConfig(router="rules", fine=False))
    summary = score_file(pipe, data, out, progress=False, extra={"note": "x"})
    text = (tmp_path / "v.config.json").read_text()
    meta = json.loads(text)
    assert meta["data"] == str(data) and meta["note"] == "x" and meta["router"] == "rules"
    assert text == json.dumps(meta, indent=2) + "\n"  # a file people read: one key per line
    assert (summary["bank_sha"], summary["ablation"], summary["out"]) == (pipe.bank.sha, "no_fine", str(out))
    assert summary["engine"] == {"batches": 1, "rows": 2}
    assert (tmp_path / "v.summary.json").read_text() == json.dumps(summary, indent=2) + "\n"


def test_score_file_resume_counts_retried_error_lines(tmp_path, capsys):


    data = synthesize(tmp_path / "d", n_tasks=1, candidates=3, size=(90, 200))
    with open(data, "a") as fh:  # a record whose screenshot is missing: a data error line
        fh.write(json.dumps({"id": "bad", "instruction": "x", "steps": [{"screenshot": "nope.png"}]}) + "\n")
    out = tmp_path / "v.jsonl"
    failing = FakeEngine(fail=lambda r: "boom" if r.kind == "verify" and r.tag in ("t000_c0", "t000_c1") else None)
    first = score_file(AdaptRubric(failing, PipelineConfig(router="rules")), data, out, progress=False)
    assert (first["skipped_resume"], first["retried_errors"]) == (0, 0)
    capsys.readouterr()
    summary = score_file(AdaptRubric(FakeEngine(), PipelineConfig(router="rules")), data, out, resume=True,
                         progress=False)
    # t000_c2 is done; the two engine errors and the still-bad record are tried again
    assert (summary["skipped_resume"], summary["retried_errors"]) == (1, 3)
    assert capsys.readouterr().err.splitlines()[0] == (
        f"resuming: 1 id(s) already in {out}, 3 to do (3 error line(s) retried)")
    # nothing retried: the message has no retry part
    again = score_file(AdaptRubric(FakeEngine(), PipelineConfig(router="rules")), data, out, resume=True,
                       progress=False, retry_errors=False)
    assert again["retried_errors"] == 0
    assert capsys.readouterr().err.splitlines()[0] == f"resuming: 4 id(s) already in {out}, 0 to do"


def test_score_file_with_an_engine_that_has_no_name(tmp_path):
    class Nameless:
        """An engine-like object without a `name` attribute (duck typing)."""

        def __init__(self):
            self._engine = FakeEngine()

        def __getattr__(self, key):
            if key == "name":
                raise AttributeError(key)
            return getattr(self._engine, key)

    data = synthesize(tmp_path / "d", n_tasks=1, candidates=1, size=(90, 200))
    summary = score_file(AdaptRubric(Nameless(), PipelineConfig(router="rules")), data, tmp_path / "v.jsonl",
                         progress=False)
    assert summary["n"] == 1 and summary["model"] is None


def test_score_file_progress_bar_names_its_unit_and_counts(tmp_path, capsys):
    data = synthesize(tmp_path / "d", n_tasks=1, candidates=3, size=(90, 200))
    eng = FakeEngine(fail=lambda r: "boom" if r.kind == "verify" and r.tag == "t000_c1" else None,
                     script=lambda r: "no verdict here" if r.kind == "verify" and r.tag != "t000_c0"
                     else default_script(r))
    score_file(AdaptRubric(eng, PipelineConfig(router="rules")), data, tmp_path / "v.jsonl")
    cap = capsys.readouterr()
    bar = cap.err.replace("\r", "\n").splitlines()
    final = [ln for ln in bar if ln.startswith("scoring: 100%")][-1].rstrip()  # tqdm pads a redraw with spaces
    # one ok, one engine error, one unparseable output
    assert "3/3" in final and "traj/s" in final and final.endswith("errors=1, unparsed=1]")
    assert cap.out == ""
    score_file(AdaptRubric(FakeEngine(), PipelineConfig(router="rules")), data, tmp_path / "v2.jsonl",
               progress=False)
    assert capsys.readouterr().err == ""  # progress=False: no bar


def test_a_failed_router_call_routes_to_the_fallback_and_says_why():
    pipe = AdaptRubric(FakeEngine(fail=lambda r: "CUDA out of memory" if r.kind == "route" else None),
                       PipelineConfig())
    res = pipe.route_many(["Turn on Wi-Fi."])["Turn on Wi-Fi."]
    assert res == RouteResult(category=pipe.bank.fallback, mode="model", raw="CUDA out of memory", parsed=False)
    assert pipe.criteria.unparsed["route"] == 1


def test_score_file_error_lines_and_summary_fields(tmp_path, ascii_locale):


    data = synthesize(tmp_path / "d", n_tasks=1, candidates=2, size=(90, 200))
    with open(data, "a", encoding="utf-8") as fh:  # a bad record with a non-ASCII id (C locale: UTF-8 anyway)
        fh.write(json.dumps({"id": "bäd", "instruction": "x", "steps": [{"screenshot": "nope.png"}]}) + "\n")
    out = tmp_path / "v.jsonl"
    failing = FakeEngine(name="judge", fail=lambda r: "boom" if r.kind == "verify" and r.tag == "t000_c0" else None)
    pipe = AdaptRubric(failing, PipelineConfig())
    pipe.route_many(["an instruction routed before this file"])  # earlier unparsed counts are not this file's
    pipe.criteria.unparsed["route"] = 5
    summary = score_file(pipe, data, out, progress=False)
    lines = {d["id"]: d for d in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert set(lines) == {"bäd", "t000_c0", "t000_c1"}
    for i in ("bäd", "t000_c0"):
        assert (lines[i]["status"], lines[i]["bank_sha"], lines[i]["model"]) == ("error", pipe.bank.sha, "judge")
    assert summary["model"] == "judge" and summary["route_unparsed"] == 0
    assert 0 < summary["s_per_traj"] < 60
    # resuming with the same failure writes no second, identical error line for either id
    size = out.stat().st_size
    score_file(AdaptRubric(failing, PipelineConfig()), data, out, resume=True, progress=False)
    assert out.stat().st_size == size


def test_router_requests_carry_the_route_cap_and_unreadable_replies_fall_back():
    eng = FakeEngine(script=lambda r: "I am not sure." if r.kind == "route" else "")
    pipe = AdaptRubric(eng, PipelineConfig(route_max_new_tokens=7))
    res = pipe.route_many(["Turn on Wi-Fi."])["Turn on Wi-Fi."]
    assert res == RouteResult(category=pipe.bank.fallback, mode="model", raw="I am not sure.", parsed=False)
    assert [r.max_new_tokens for b in eng.batches for r in b] == [7]


def test_pipeline_refuses_unusable_settings_with_clear_messages():
    with pytest.raises(ValueError) as ei:
        AdaptRubric(None, PipelineConfig(router="rules", fixed_category="cooking"))
    families = AdaptRubric(None, PipelineConfig(router="rules")).bank.family_names
    assert str(ei.value) == f"fixed_category must be one of the bank's families ({', '.join(families)}), got 'cooking'"
    with pytest.raises(ValueError) as ei:
        AdaptRubric(None, PipelineConfig(router="model"))
    assert str(ei.value) == ("router='model' (the paper's default) needs an engine; use router='rules' to run "
                             "without a model")
    # a fixed family needs no router, so no engine is needed to route
    pipe = AdaptRubric(None, PipelineConfig(router="model", fixed_category=families[0]))
    assert pipe.route_many(["x"])["x"].category == families[0]


def test_without_an_engine_cues_come_from_the_manual_list():
    pipe = AdaptRubric(None, PipelineConfig(router="rules", manual_cues=None))
    key = ("Type 'Hello' in Notes.", "create_modify")
    assert pipe.cues_many([key]) == {key: manual_cues([], key[0], filter_words=False, limit_length=False)}


def test_an_unreadable_router_reply_goes_to_the_banks_own_fallback(tmp_path):
    text = Path(DEFAULT_BANK).read_text(encoding="utf-8")
    bank = tmp_path / "bank.yaml"
    text = text.replace("  general:\n", "  everything_else:\n").replace("version: 1\n", "version: 1\ntaxonomy: custom\n")
    bank.write_text(text, encoding="utf-8")
    pipe = AdaptRubric(FakeEngine(script=lambda r: "hmm"), PipelineConfig(bank_path=str(bank)))
    assert pipe.bank.fallback == "everything_else"
    res = pipe.route_many(["Turn on Wi-Fi."])["Turn on Wi-Fi."]
    assert (res.category, res.parsed) == ("everything_else", False)


def test_canonical_records_that_are_not_objects_or_lack_steps(tmp_path):
    p = tmp_path / "data.jsonl"
    p.write_text('[1, 2]\n{"id": "t1", "instruction": "x"}\n{"id": "t2", "instruction": "x", "steps": []}\n')
    res = canonical.load(p)
    assert res.trajectories == []
    assert [str(e) for e in res.errors] == [
        f"{p}, record line 1: expected a JSON object, got list",
        f"{p}, record line 2 (id t1), field 'steps': required field missing",
        f"{p}, record line 3 (id t2), field 'steps': trajectory has no steps"]
    assert [e.record_id for e in res.errors] == [None, "t1", "t2"]
