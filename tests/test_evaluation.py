"""Metrics, test-time scaling and ablation deltas against values worked out by hand."""
import json

import pytest

from adaptrubric_local import AdaptRubric, FakeEngine, PipelineConfig, Verdict, load_trajectories
from adaptrubric_local.cli import main
from adaptrubric_local.evaluation import harness, metrics, tts

from conftest import canonical_record, write_jsonl


def V(id, label, score=None, status="ok", platform="android", task=None, p=None):
    return Verdict(id=id, label=label, score=score if status == "ok" else None, status=status, platform=platform,
                   task_id=task, p_success=p, evidence_sufficient=True if status == "ok" else None,
                   missing_evidence="none" if status == "ok" else None, prompt_tokens=100, completion_tokens=10,
                   n_images=3)


METRIC_SET = [
    V("a1", 1, 1), V("a2", 1, 0), V("a3", 0, 1), V("a4", 0, 0),                      # android: one of each
    V("w1", 0, 0, platform="web"), V("w2", 0, 1, platform="web"), V("w3", 0, 0, platform="web"),  # no positives
    V("u1", 1, 1, platform="ubuntu"), V("u2", 1, status="unparsed", platform="ubuntu"),
    V("u3", 0, status="error", platform="ubuntu"),
]


def test_metrics_by_hand():
    m = metrics.evaluate(METRIC_SET)
    o = m["overall"]
    # headline: every trajectory classified; u2 (label 1, unparsed) is a false negative, u3 (label 0,
    # error) a true negative
    assert o["confusion"] == {"tp": 2, "fp": 2, "tn": 4, "fn": 2}
    assert o["unanswered_as_fail"] == {"fn": 1, "tn": 1}
    assert (o["n"], o["scored"], o["unparsed"], o["errors"]) == (10, 8, 1, 1)
    assert o["acc"] == pytest.approx(60.0) and o["prec"] == pytest.approx(50.0)
    assert o["rec"] == pytest.approx(50.0) and o["f1"] == pytest.approx(50.0)
    assert o["fpr"] == pytest.approx(100 / 3) and o["acc_strict"] == pytest.approx(50.0)
    s = o["scored_only"]  # the scored verdicts alone
    assert s["n"] == 8 and s["confusion"] == {"tp": 2, "fp": 2, "tn": 3, "fn": 1}
    assert s["acc"] == pytest.approx(62.5) and s["prec"] == pytest.approx(50.0)
    assert s["rec"] == pytest.approx(200 / 3) and s["f1"] == pytest.approx(400 / 7) and s["fpr"] == pytest.approx(40.0)
    a = m["per_platform"]["android"]
    assert (a["acc"], a["prec"], a["rec"], a["f1"], a["fpr"]) == (50.0, 50.0, 50.0, 50.0, 50.0)
    w = m["per_platform"]["web"]  # no positives: recall and F1 undefined, not 0
    assert w["acc"] == pytest.approx(200 / 3) and w["prec"] == 0.0 and w["rec"] is None and w["f1"] is None
    assert w["fpr"] == pytest.approx(100 / 3)
    u = m["per_platform"]["ubuntu"]  # unparsed and errors are counted, and classified as predicted failures
    assert (u["scored"], u["unparsed"], u["errors"]) == (1, 1, 1)
    assert u["acc"] == pytest.approx(200 / 3) and u["rec"] == pytest.approx(50.0) and u["fpr"] == 0.0
    assert (u["scored_only"]["acc"], u["scored_only"]["fpr"]) == (100.0, None)
    assert u["acc_strict"] == pytest.approx(100 / 3)


def test_headline_never_rewards_an_unanswered_positive():
    # a verifier that answers only on failures: scored-only it looks perfect, the headline does not
    vs = [V("p1", 1, status="unparsed"), V("p2", 1, status="error"), V("n1", 0, 0), V("n2", 0, 0)]
    o = metrics.classification(vs)
    assert o["scored_only"]["acc"] == 100.0 and o["acc"] == 50.0 and o["rec"] == 0.0 and o["prec"] is None
    assert o["confusion"] == {"tp": 0, "fp": 0, "tn": 2, "fn": 2}


def test_efficiency_falls_back_to_verifier_tokens():
    e = metrics.efficiency(METRIC_SET, {"calls_per_traj": 1.25, "tokens_per_traj": 9e9, "s_per_traj": 0.5})
    # no cost fields in these verdicts: each verdict's own call; the summary's counts are not used
    assert e["tokens_per_traj"] == 110 and e["calls"] == 10 and e["calls_per_traj"] == 1.0
    assert e["minutes"] == pytest.approx(10 * 0.5 / 60) and e["s_per_traj"] == 0.5
    assert e["accounting"].startswith("verifier calls only")
    err = Verdict(id="e", status="error", error="bad record")  # never reached the model
    assert metrics.efficiency([err])["calls"] == 0


def test_efficiency_counts_every_model_call():
    vs = [V("a", 1, 1), V("b", 0, 0), V("c", 0, 0), V("d", 1, status="error")]
    costs = [(160.0, 1.5), (160.0, 1.5), (150.0, 1.25), (0.0, 0.0)]
    for v, (tok, calls) in zip(vs, costs):
        v.cost_tokens, v.cost_calls = tok, calls  # router and cue calls already split by the pipeline
    e = metrics.efficiency(vs[:3])
    assert e["tokens"] == 470 and e["calls"] == 4.25 and e["calls_per_traj"] == pytest.approx(4.25 / 3)
    assert e["tokens_per_traj"] == pytest.approx(470 / 3) and e["accounting"].startswith("all model calls")
    mixed = metrics.efficiency(vs)  # the error verdict has no cost fields: it falls back to its own call
    assert mixed["tokens"] == 470 + 110 and mixed["calls"] == 5.25 and mixed["accounting"].startswith("mixed")


TTS_SET = [
    V("c1", 0, 1, task="T1", p=0.6), V("c2", 1, 1, task="T1", p=0.9), V("c3", 0, 0, task="T1", p=0.2),
    V("c1", 0, 0, task="T2", p=0.3), V("c2", 0, 1, task="T2", p=0.7), V("c3", 0, status="unparsed", task="T2"),
    V("c1", 1, status="unparsed", task="T3"), V("c2", 0, 0, task="T3", p=0.1), V("c3", 1, 0, task="T3", p=0.4),
    V("c1", 1, 1, task="T4", p=0.8), V("c2", 1, 1, task="T4", p=0.6), V("c3", 0, 1, task="T4", p=0.95),
]


def test_tts_by_hand():
    r = tts.curves(TTS_SET, seed=None)  # candidates in id order, so every number can be checked by hand
    assert r["earlystop"] == {1: 50.0, 2: 25.0, 3: 50.0}
    assert r["bestofn"] == {1: 50.0, 2: 50.0, 3: 50.0}
    assert r["bestofn_soft"] == {1: 50.0, 2: 50.0, 3: 50.0}
    assert r["random"][1] == 50.0 and r["random"][2] == 50.0 and r["random"][3] == pytest.approx(125 / 3)
    assert r["oracle"] == {1: 50.0, 2: 75.0, 3: 75.0}
    assert r["gain_over_random"]["earlystop"][3] == pytest.approx(50 - 125 / 3)
    p = r["pool"]
    assert (p["tasks"], p["all_fail"], p["all_pass"], p["mixed"]) == (4, 1, 0, 3)
    # equal trials per task: Random@1 (expected, one uniform trial per task) equals the trial SR
    assert p["trial_sr"] == pytest.approx(500 / 12) and p["random_at_1_expected"] == pytest.approx(500 / 12)
    assert p["oracle_at_max"] == 75.0 and p["headroom"] == pytest.approx(75 - 500 / 12)
    assert p["unparsed"] == 2 and p["scored"] == 10 and r["informative"] is True


def test_tts_selection_rules():
    t1 = [v for v in TTS_SET if v.task_id == "T1"]
    assert tts.earlystop(t1, 3).id == "c1"             # first predicted success
    assert tts.bestofn(t1, 3).id == "c2"               # last of the tied successes
    t4 = [v for v in TTS_SET if v.task_id == "T4"]
    assert tts.bestofn(t4, 3).id == "c3" and tts.bestofn(t4, 3, soft=True).id == "c3"
    assert tts.bestofn(t4, 2, soft=True).id == "c1"    # p_success breaks the tie
    t3 = [v for v in TTS_SET if v.task_id == "T3"]
    assert tts.earlystop(t3, 1).id == "c1"             # unparsed is not success: falls back to last scanned


def test_tts_shuffle_is_fixed_per_task():
    a = tts.groups(TTS_SET)
    b = tts.groups(list(reversed(TTS_SET)))
    assert {k: [v.id for v in c] for k, c in a.items()} == {k: [v.id for v in c] for k, c in b.items()}
    assert sorted(v.id for v in a["T1"]) == ["c1", "c2", "c3"]
    with pytest.raises(ValueError, match="task_id"):
        tts.curves([V("x", 1, 1)])


def _verdict_file(path, verdicts):
    path.write_text("".join(json.dumps(v.to_dict()) + "\n" for v in verdicts))
    return path


def test_eval_and_tts_commands_write_reports(tmp_path, capsys):
    vf = _verdict_file(tmp_path / "v.jsonl", METRIC_SET)
    assert main(["eval", "--data", str(tmp_path / "none"), "--verdicts", str(vf), "--out", str(tmp_path / "e")]) == 2
    capsys.readouterr()
    # without --data the labels in the verdict lines are used
    from adaptrubric_local.evaluation.harness import run_eval, run_tts

    m = run_eval(vf, tmp_path / "e")
    for f in ("metrics.json", "report.md", "confusion.png", "per_platform.png", "run.json"):
        assert (tmp_path / "e" / f).is_file()
    saved = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert set(saved["overall"]) >= {"acc", "prec", "rec", "f1", "fpr", "n", "unparsed"}
    assert saved["overall"]["acc"] == m["overall"]["acc"] == 60.0
    assert saved["overall"]["scored_only"]["acc"] == 62.5
    report = (tmp_path / "e" / "report.md").read_text()
    assert "package_version" in saved["run"] and "| web | 3 | 0 |" in report
    assert "| 10 | 8 | 1 | 1 | 60.0 | 50.0 | 50.0 | 50.0 | 33.3 |" in report  # headline row, all n
    assert "| 8 | 62.5 | 50.0 | 66.7 | 57.1 | 40.0 | 50.0 |" in report  # scored-only row
    assert "1 of them are successful trajectories (false negatives), 1 failed ones" in report
    from dataclasses import replace

    # a verdict file holds one line per id (readers keep the last), so ids are made unique across tasks
    tf = _verdict_file(tmp_path / "t.jsonl", [replace(v, id=f"{v.task_id}-{v.id}") for v in TTS_SET])
    r = run_tts(tf, tmp_path / "t", seed=None)
    saved = json.loads((tmp_path / "t" / "tts.json").read_text())
    assert saved["oracle"]["2"] == 75.0 and (tmp_path / "t" / "tts.png").is_file() and r["pool"]["mixed"] == 3


def test_compare(tmp_path):
    from adaptrubric_local.evaluation.harness import compare, run_eval

    a = run_eval(_verdict_file(tmp_path / "a.jsonl", METRIC_SET), tmp_path / "A")
    changed = [V(v.id, v.label, 1 if v.status == "ok" else None, v.status, v.platform) for v in METRIC_SET]
    run_eval(_verdict_file(tmp_path / "b.jsonl", changed), tmp_path / "B")
    text = compare(tmp_path / "A", tmp_path / "B")
    row = next(line for line in text.splitlines() if line.startswith("overall.acc "))
    # all 8 scored predicted 1: the 3 scored positives right, plus the error verdict on a failure (predicted 0)
    assert row.split()[1:] == ["60.00", "40.00", "-20.00"]
    row = next(line for line in text.splitlines() if line.startswith("overall.scored_only.acc "))
    assert row.split()[1:] == ["62.50", "37.50", "-25.00"]
    assert next(line for line in text.splitlines() if line.startswith("package_version")).count("0.1.0") == 2
    assert a["overall"]["acc"] == 60.0


def test_ablation_deltas_by_hand(tmp_path):
    labels = {"alpha": 1, "bravo": 1, "charlie": 0, "delta": 0}
    recs = [canonical_record(tmp_path, k, 3, instruction=f"Turn on Bluetooth for {k}.", label=lab, task_id=k)
            for k, lab in labels.items()]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    predictions = {"full": {"alpha": 1, "bravo": 1, "charlie": 0, "delta": 0},
                   "no_fine": {"alpha": 1, "bravo": 0, "charlie": 0, "delta": 0},
                   "no_coarse": {"alpha": 1, "bravo": 1, "charlie": 1, "delta": 0},
                   "no_both": {"alpha": None, "bravo": 0, "charlie": 1, "delta": 1}}

    def script(req):
        if req.kind == "route":
            return "CATEGORY: state_navigation"
        if req.kind == "cue":
            return "CUE_1: Pay attention to whether Bluetooth shows ON."
        coarse, fine = "VERIFICATION STEPS:" in req.prompt, "ATTENTION CUES" in req.prompt
        setting = {(True, True): "full", (True, False): "no_fine", (False, True): "no_coarse",
                   (False, False): "no_both"}[(coarse, fine)]
        who = next(k for k in labels if f"for {k}." in req.prompt)
        s = predictions[setting][who]
        return "I cannot tell" if s is None else f"SCORE: {s}\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"

    eng = FakeEngine(script=script)
    pipe = AdaptRubric(eng, PipelineConfig(router="model"))
    res = harness.run_ablation(pipe, data, tmp_path / "abl", progress=False)
    s = res["settings"]
    assert s["full"]["overall"]["acc"] == 100.0 and s["full"]["delta"]["acc"] is None
    assert s["no_fine"]["delta"]["acc"] == -25.0 and s["no_fine"]["delta"]["f1"] == pytest.approx(200 / 3 - 100)
    assert s["no_coarse"]["delta"]["acc"] == -25.0 and s["no_coarse"]["delta"]["f1"] == pytest.approx(-20.0)
    assert s["no_both"]["overall"]["unparsed"] == 1 and s["no_both"]["delta"]["acc"] == -100.0
    assert s["no_both"]["overall"]["f1"] == 0.0
    # routes and cues computed once for all four settings
    assert res["run"]["shared_calls"] == {"route": 4, "cue": 4}
    assert (tmp_path / "abl" / "report.md").read_text().count("|") > 20
    assert len(load_trajectories(data).trajectories) == 4
