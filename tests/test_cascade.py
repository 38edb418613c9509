"""The student answers, the judge checks (adaptrubric_local/cascade, `score --judge-url`, `cascade-fit`):
the student and the judge are two scripted OpenAI-compatible servers on loopback (tests/openai_stub.py),
so the whole method runs over HTTP on both; the student is wrong on one trajectory, cannot answer
another, and the judge is down for a third in the first run."""
import json

import pytest
from openai_stub import Running, Stub, file_pixels

from adaptrubric_local.audit.verdict import wilson
from adaptrubric_local.cascade.band import Pair, fit_band
from adaptrubric_local.cascade.report import cascade_summary, estimate
from adaptrubric_local.cascade.scorer import CascadeVerdict, escalation, spot_drawn
from adaptrubric_local.cli import main
from adaptrubric_local.types import Verdict

from conftest import make_png, write_jsonl


class Judge(Stub):
    """The stub, answering HTTP 400 for the trajectories whose final frame is in `down`."""

    def __init__(self, scores, served):
        super().__init__(scores, served=served)
        self.down: set[str] = set()

    def reply(self, body, auth):
        parts = body["messages"][0]["content"]
        images = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
        out = super().reply(body, auth)
        if images and self.calls[-1]["images"][-1] in self.down:
            raise ValueError("the judge is overloaded")
        return out


@pytest.fixture
def data(tmp_path):
    return make_data(tmp_path)


def make_data(tmp_path):
    """Six trajectories t{k}{label}: the judge knows every final frame; the student says 1 for t00
    (label 0) and does not know t11's final frame (an unparsed verdict)."""
    recs, truth, final = [], {}, {}
    for k in range(3):
        for label in (1, 0):
            tid = f"t{k}{label}"
            steps = [{"screenshot": f"img/{tid}_{i}.png", "action": f"tap({i})"} for i in range(2)]
            for i, s in enumerate(steps):
                make_png(tmp_path / s["screenshot"], seed=10 * (2 * k + label) + i)
            final[tid] = file_pixels(tmp_path / steps[-1]["screenshot"])
            truth[final[tid]] = label
            recs.append({"id": tid, "instruction": f"Turn on setting {k}.", "steps": steps, "label": label})
    student = {h: (1 if tid == "t00" else truth[h]) for tid, h in final.items() if tid != "t11"}
    return write_jsonl(tmp_path / "trajs.jsonl", recs), final, student, truth


@pytest.fixture
def servers(data):
    s, j = start_servers(data)
    yield s, j
    s.close()
    j.close()


def start_servers(data):
    """The student's and the judge's servers for `make_data`'s trajectories."""
    _, _, student, truth = data
    return Running(Stub(student, served="student")), Running(Judge(truth, served="judge"))


def _score(path, s, j, out, *extra) -> int:
    return main(["score", str(path), "--openai-url", s.url, "--model", "student", "--judge-url", j.url,
                 "--judge-name", "judge", "--judge-max-retries", "0", "--out", str(out), "--quiet", *extra])


def _lines(path) -> dict:
    last = {}
    for line in path.read_text().splitlines():
        d = json.loads(line)
        last[d["id"]] = d
    return last


def test_escalation_reasons_and_the_seeded_spot_check():
    band = (0.3, 0.7)
    assert escalation(Verdict(id="a", status="unparsed"), band) == ["unparsed"]
    assert escalation(Verdict(id="a", status="error"), band) == ["error"]
    assert escalation(Verdict(id="a", score=1, p_success=0.5, evidence_sufficient=False), band) == [
        "evidence_insufficient", "band"]
    assert escalation(Verdict(id="a", score=1, p_success=0.95), band) == []
    assert escalation(Verdict(id="a", score=1, p_success=None), band) == []  # no p_success: the band cannot say
    drawn = [spot_drawn(7, f"id{i}", 0.1) for i in range(5000)]
    assert 0.08 < sum(drawn) / 5000 < 0.12 and drawn == [spot_drawn(7, f"id{i}", 0.1) for i in range(5000)]
    assert drawn != [spot_drawn(8, f"id{i}", 0.1) for i in range(5000)]
    assert escalation(Verdict(id="id3", score=1, p_success=0.99), band, 1.0) == ["spot_check"]


def test_cascade_lines_say_who_decided_judge_down_then_resume_asks_only_those(data, servers, tmp_path, capsys):
    path, final, _, _ = data
    s, j = servers
    j.stub.down = {final["t20"]}
    out = tmp_path / "v.jsonl"
    assert _score(path, s, j, out, "--escalate-band", "0.15", "0.25", "--spot-check", "0") == 0
    lines = _lines(out)
    assert set(lines) == {f"t{k}{lab}" for k in range(3) for lab in (0, 1)}  # no line lost
    by = {i: d["decided_by"] for i, d in lines.items()}
    assert by == {"t01": "student", "t00": "student", "t11": "judge", "t10": "judge", "t21": "student",
                  "t20": "student"}
    assert lines["t00"]["score"] == 1 and lines["t00"]["escalated"] == []  # confidently wrong: stays
    assert lines["t11"]["escalated"] == ["unparsed"] and lines["t11"]["score"] == 1
    assert lines["t11"]["student"]["status"] == "unparsed" and lines["t11"]["judge"]["score"] == 1
    assert lines["t10"]["escalated"] == ["band"] and lines["t10"]["student"]["p_success"] == pytest.approx(0.2)
    assert lines["t20"]["judge_error"].startswith("error:") and "400" in lines["t20"]["judge_error"]
    assert lines["t20"]["score"] == 0 and lines["t20"]["model"].startswith("student@")  # the student's verdict stands
    from adaptrubric_local.evaluation.review import cascade_note
    from adaptrubric_local.verdict_file import iter_last_lines

    note = cascade_note(next(v for v in map(CascadeVerdict.from_dict, iter_last_lines(out)) if v.id == "t20"))
    assert note.startswith("decided by the student (band); the judge gave no verdict (BadRequestError: Error code: "
                           "400 - the judge is overloaded)"), note
    assert note.endswith("so the student's SCORE 0 (p_success 0.20) stands (`score --resume` asks the judge again)")
    assert "error:" not in note and "record " not in note and "trajs.jsonl" not in note
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    c = summary["cascade"]
    assert c["sent_to_judge"] == 3 and c["why"] == {"unparsed": 1, "band": 2} and c["judge_failed"] == 1
    assert c["decided_by"] == {"student": 4, "judge": 2} and c["judge_calls"] > 0
    assert "cascade: 3 of 6 trajectories sent to the judge" in capsys.readouterr().err

    j.stub.down = set()
    before = [c["images"][-1] for c in j.stub.of_kind("verify")]
    assert _score(path, s, j, out, "--escalate-band", "0.15", "0.25", "--spot-check", "0", "--resume") == 0
    asked = [c["images"][-1] for c in j.stub.of_kind("verify")][len(before):]
    assert asked == [final["t20"]]  # only the line whose judge failed
    lines = _lines(out)
    assert lines["t20"]["decided_by"] == "judge" and lines["t20"]["judge_error"] is None
    c = json.loads(out.with_suffix(".summary.json").read_text())["cascade"]
    assert c["judge_failed"] == 0 and c["judge_retried_this_run"] == 1 and c["decided_by"]["judge"] == 3

    raw = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert len(raw) == 7 and raw.count("t20") == 2  # the resumed file: t20 asked again, its first line kept
    capsys.readouterr()
    compact = tmp_path / "c.jsonl"
    assert main(["compact", str(out), "--out", str(compact)]) == 0
    assert capsys.readouterr().out.startswith(f"{compact}: 6 line(s), one per id (7 in {out}")
    rows = [json.loads(x) for x in compact.read_text().splitlines()]
    assert [d["id"] for d in rows] == list(dict.fromkeys(raw)) and {d["id"]: d for d in rows} == lines
    assert json.loads(compact.with_suffix(".summary.json").read_text())["cascade"]["judge_failed"] == 0
    assert main(["compact", str(out), "--out", str(compact)]) != 0  # a file holding lines is not overwritten
    assert f"{compact} exists" in capsys.readouterr().err


def test_spot_checks_give_the_agreement_and_cascade_fit_says_when_the_target_is_out_of_reach(data, servers,
                                                                                              tmp_path, capsys):
    path, _, _, _ = data
    s, j = servers
    out = tmp_path / "both.jsonl"
    assert _score(path, s, j, out, "--spot-check", "1") == 0
    c = json.loads(out.with_suffix(".summary.json").read_text())["cascade"]
    assert c["decided_by"] == {"student": 0, "judge": 6}
    spot = c["spot_checks"]
    assert (spot["agree"], spot["n"]) == (4, 6) and spot["ci95"][0] < 4 / 6 < spot["ci95"][1]  # t00 and t11
    band = tmp_path / "band.json"
    assert main(["cascade-fit", str(out), "--target-agreement", "0.97", "--out", str(band)]) == 1
    assert "the target cannot be met" in capsys.readouterr().err
    assert main(["cascade-fit", str(out), "--target-agreement", "0.97", "--max-judge-share", "1",
                 "--spot-check", "0", "--out", str(band)]) == 1  # 6 of 6: the 95% interval reaches down to 0.61
    assert "lower end of its 95% interval" in capsys.readouterr().err
    assert main(["cascade-fit", str(out), "--target-agreement", "0.97", "--max-judge-share", "1",
                 "--spot-check", "0", "--confidence", "0", "--out", str(band)]) == 0
    fitted = json.loads(band.read_text())
    assert fitted["met"] and fitted["tight_band"] == [0.9, 0.9] and fitted["judge_share"] == pytest.approx(4 / 6)
    assert json.loads(capsys.readouterr().out)["band"] == fitted["band"]
    ev = tmp_path / "eval"  # eval shows the student and the judge side by side where both answered
    assert main(["eval", str(path), "--verdicts", str(out), "--out", str(ev), "--no-review", "--quiet"]) == 0
    side = json.loads((ev / "metrics.json").read_text())["cascade"]
    assert side["both_answered"] == 5 and side["student_vs_judge"]["agree"] == 4  # t11: the student unparsed
    assert side["judge_vs_labels"]["agree"] == 5 and side["student_vs_labels"]["agree"] == 4
    report = (ev / "report.md").read_text()
    assert "## Student and judge" in report
    out.with_suffix(".summary.json").unlink()  # without the summary sidecar: the same section, from the lines
    ev2 = tmp_path / "eval2"
    assert main(["eval", str(path), "--verdicts", str(out), "--out", str(ev2), "--no-review", "--quiet"]) == 0
    assert json.loads((ev2 / "metrics.json").read_text())["cascade"] == side
    section = report[report.index("## Student and judge"):]
    assert (ev2 / "report.md").read_text().endswith(section)
    assert side["decided"] == f"judge@{j.url} (the judge decided all 6; student student@{s.url})"
    ev3 = tmp_path / "eval3"  # the review page's header names the model that decided: the judge
    assert main(["eval", str(path), "--verdicts", str(out), "--out", str(ev3), "--quiet"]) == 0
    assert f"Verifier review: judge@{j.url} (the judge decided all 6; student student@{s.url}) on trajs.jsonl" in (
        ev3 / "review_files" / "index.js").read_text()
    from adaptrubric_local.evaluation.harness import load_verdicts
    from adaptrubric_local.evaluation.review import Preparer, card
    from adaptrubric_local.formats import load_trajectories

    trajs = {t.id: t for t in load_trajectories(path).trajectories}
    cards = {v.id: card(v, trajs[v.id], Preparer()) for v in load_verdicts(out)}  # the review page's cards
    assert cards["t00"]["decided_by"] == "judge" and cards["t00"]["student"]["score"] == 1
    assert ("decided by the judge (band, spot_check); the student said SCORE 1 (p_success 0.90), the judge SCORE 0 "
            "(p_success 0.20)") in cards["t00"]["notes"]
    assert any("the student said unparsed" in n for n in cards["t11"]["notes"])
    out2 = tmp_path / "v2.jsonl"  # score reads the file: now t00 (p 0.9) goes to the judge
    assert _score(path, s, j, out2, "--cascade-band", str(band), "--spot-check", "0") == 0
    lines = _lines(out2)
    assert lines["t00"]["decided_by"] == "judge" and lines["t00"]["score"] == 0
    assert json.loads(out2.with_suffix(".config.json").read_text())["cascade"]["band"] == fitted["band"] == [0.55, 1.0]


def test_an_unreachable_judge_is_refused_before_the_first_trajectory(data, servers, tmp_path, capsys):
    path, _, _, _ = data
    s, _ = servers
    out = tmp_path / "v.jsonl"
    assert main(["score", str(path), "--openai-url", s.url, "--model", "student", "--judge-url",
                 "http://127.0.0.1:9/v1", "--judge-name", "judge", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "judge at http://127.0.0.1:9/v1 did not answer" in err[0], err
    assert s.stub.of_kind("verify") == [] and not out.exists()
    assert main(["score", str(path), "--openai-url", s.url, "--model", "student", "--spot-check", "0.5",
                 "--out", str(out)]) == 2
    assert "--spot-check need(s) a judge" in capsys.readouterr().err


def test_cascade_fit_names_the_sample_size_when_that_is_the_cause():
    pairs = [Pair("ok", 1, 0.95, True, 1) for _ in range(24)] + [Pair("ok", 0, 0.05, True, 0) for _ in range(24)]
    r = fit_band(pairs, 0.97, max_share=1.0)  # 48/48 agree: the 95% interval's lower end is 0.926
    assert not r["met"] and r["pairs_needed"] == 125 and r["agreement"] == 1.0
    assert r["why_not"].startswith("48 pairs are too few for the target 0.97 at 95% confidence")
    assert "the target needs 125 pairs" in r["why_not"] and "--max-judge-share" not in r["why_not"]
    assert wilson(125, 125)[0] >= 0.97 > wilson(124, 124)[0]
    assert fit_band(pairs * 3, 0.97, max_share=1.0)["met"]  # 144 pairs: enough
    wrong = pairs[:40] + [Pair("ok", 1, 0.95, True, 0) for _ in range(8)]  # 40/48: the data, not the sample
    r = fit_band(wrong, 0.97, max_share=0.05, spot_check=0.0)
    assert "pairs_needed" not in r and "needs more than --max-judge-share 0.05" in r["why_not"]


def test_a_band_that_sends_more_than_half_says_so_with_the_fit_command():
    def line(i, why):
        return {"id": str(i), "decided_by": "judge" if why else "student", "escalated": why,
                "judge": {"status": "ok", "score": 1} if why else None}

    c = cascade_summary([line(i, ["band"]) for i in range(3)] + [line(3, [])])
    assert c["note"].startswith("the band sent 3 of 4 trajectories (75%) to the judge")
    assert "cascade-fit VERDICTS --out band.json" in c["note"] and "--cascade-band band.json" in c["note"]
    assert "note" not in cascade_summary([line(i, ["band"]) for i in range(2)] + [line(2, []), line(3, [])])
    assert "note" not in cascade_summary([line(i, ["unparsed"]) for i in range(3)] + [line(3, [])])


def test_a_judge_url_without_its_scheme_is_named(data, tmp_path, capsys):
    path = data[0]
    assert main(["score", str(path), "--openai-url", "http://127.0.0.1:9/v1", "--model", "student", "--judge-url",
                 "127.0.0.1:8711", "--judge-name", "judge", "--out", str(tmp_path / "v.jsonl")]) != 0
    assert ("--judge-url '127.0.0.1:8711' lacks http:// (or https://): give the judge's /v1 base, e.g. "
            "http://127.0.0.1:8711/v1") in capsys.readouterr().err


def test_band_fit_and_the_estimate_on_known_pairs():
    pairs = [Pair("ok", 1, 0.95, True, 1)] * 80 + [Pair("ok", 0, 0.05, True, 0)] * 80 + [
        Pair("ok", 1, 0.6, True, 0)] * 10 + [Pair("ok", 0, 0.4, True, 0)] * 10 + [Pair("unparsed", None, None, None, 1)]
    fit = fit_band(pairs, 0.97)
    assert fit["met"] and fit["tight_band"] == [0.6, 0.6] and fit["judge_share"] == pytest.approx(11 / 181)
    assert fit["band"] == pytest.approx([0.5, 0.775])  # halfway to the nearest p_success outside it: 0.4 and 0.95
    assert fit["agreement"] == 1.0 and fit["student_only_agreement"] == pytest.approx(170 / 181)
    assert not fit_band(pairs, 0.97, max_share=0.01)["met"]
    assert fit["agreement_lower"] == pytest.approx(wilson(181, 181)[0]) and fit["agreement_lower"] >= 0.97
    # half the rest spot-checked: the judge decides half of the 10 wrong ones, 0.972 without a band: enough
    # for the fit set's own figure (confidence 0), not for the lower end of its 95% interval (0.934)
    spot = fit_band(pairs, 0.97, spot_check=0.5, confidence=0)
    assert spot["agreement"] == pytest.approx(1 - 5 / 181) and spot["judge_share"] == pytest.approx((1 + 90) / 181)
    lo, hi = spot["band"]
    assert not any(lo <= p.p_success <= hi for p in pairs if p.p_success is not None)
    sure = fit_band(pairs, 0.97, spot_check=0.5)
    assert sure["met"] and sure["tight_band"] == [0.6, 0.6] and sure["band"] == pytest.approx([0.5, 0.775])
    assert sure["judge_share"] == pytest.approx((11 + 0.5 * 170) / 181)
    too_sure = fit_band(pairs, 0.99, confidence=0.95)  # 181 of 181 agree: the interval's lower end is 0.979
    assert not too_sure["met"] and "lower end of its 95% interval is 0.979" in too_sure["why_not"]
    assert too_sure["why_not"].startswith("181 pairs are too few") and too_sure["pairs_needed"] == 381
    est = estimate(100, 80, [True] * 9 + [False])
    assert est["agreement"] == pytest.approx((20 + 80 * 0.9) / 100) and est["ci95"][0] < est["agreement"]
    assert cascade_summary([])["cascade_agreement_est"] is None


# ----------------------------------------------------------------------------- as a reward
def _fake(scores: dict[str, int], p: float = 0.95):
    """A scripted verifier scoring each trajectory by its instruction's marker `(id)` with P(its answer) = p."""
    import re

    from adaptrubric_local.dry_run import FakeEngine, pipeline_script

    def script(req):
        if req.kind != "verify":
            return pipeline_script(req)
        tid = re.search(r"\((\w+)\)", req.prompt).group(1)
        return f"Checked.\nSCORE: {scores[tid]}\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"

    return FakeEngine(script=script, p_score=lambda req, digit: p if digit == "1" else 1 - p)


def test_reward_model_with_a_judge_reports_the_live_agreement_and_warns(tmp_path, caplog):
    from adaptrubric_local.pipeline import PipelineConfig
    from adaptrubric_local.rewards.model import RewardModel

    recs = []
    for i in range(10):
        make_png(tmp_path / f"s{i}.png", seed=i)
        recs.append({"id": f"r{i}", "instruction": f"Turn on Wi-Fi (r{i}).", "steps": [{"screenshot": f"s{i}.png"}]})
    truth = {f"r{i}": i % 2 for i in range(10)}
    wrong = {**truth, "r0": 1, "r2": 1, "r4": 1}  # the student passes three failures
    rm = RewardModel(engine=_fake(wrong), judge_engine=_fake(truth), data_root=str(tmp_path),
                     pipeline=PipelineConfig(router="rules", fine=False),
                     judge={"spot_check": 1.0, "escalate_band": (0.4, 0.6), "warn_below": 0.9, "agreement_window": 6})
    with caplog.at_level("WARNING", logger="adaptrubric.cascade"):
        assert rm.rewards(recs) == [float(truth[r["id"]]) for r in recs]  # every one checked: the judge's reward
    live = rm.stats["cascade"]
    assert live["trajectories"] == 10 and live["decided_by_judge"] == 10 and live["why"] == {"spot_check": 10}
    a = live["agreement"]
    assert (a["n"], a["agree"]) == (6, 5) and a["ci95"][0] < 5 / 6 < a["ci95"][1]  # the window: r4-r9
    assert a["warning"] is False  # the upper end of 5/6 is above 0.9
    assert rm.rewards(recs[:5]) == [0.0, 1.0, 0.0, 1.0, 0.0]  # r0, r2, r4 wrong again: 3 of the window's 6
    a = rm.stats["cascade"]["agreement"]
    assert (a["n"], a["agree"]) == (6, 3) and a["warning"] is True
    assert "below warn_below 0.90" in caplog.text
    rm.close()
    with pytest.raises(ValueError, match="unknown option"):
        RewardModel(engine=_fake(truth), judge={"judge_colour": 1})
    with pytest.raises(ValueError, match="judge needs judge_url"):
        RewardModel(engine=_fake(truth), judge={"spot_check": 0.1})


def test_the_reward_service_stats_carry_the_live_agreement(tmp_path):
    pytest.importorskip("fastapi")
    uvicorn = pytest.importorskip("uvicorn")
    import threading
    import time
    import urllib.request

    from adaptrubric_local.pipeline import PipelineConfig
    from adaptrubric_local.rewards.model import RewardModel
    from adaptrubric_local.rewards.serve import build_app

    from conftest import free_port

    recs = []
    for i in range(4):
        make_png(tmp_path / f"s{i}.png", seed=i)
        recs.append({"id": f"r{i}", "instruction": f"Open the app (r{i}).",
                     "steps": [{"screenshot": str(tmp_path / f"s{i}.png")}]})
    truth = {f"r{i}": i % 2 for i in range(4)}
    rm = RewardModel(engine=_fake({**truth, "r0": 1}), judge_engine=_fake(truth), image_roots=[str(tmp_path)],
                     pipeline=PipelineConfig(router="rules", fine=False), judge={"spot_check": 1.0})
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(rm), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.02)
        base = f"http://127.0.0.1:{port}"
        req = urllib.request.Request(f"{base}/score", data=json.dumps({"trajectories": recs}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            body = json.loads(r.read())
        assert body["rewards"] == [0.0, 1.0, 0.0, 1.0] and [v["decided_by"] for v in body["verdicts"]] == ["judge"] * 4
        with urllib.request.urlopen(f"{base}/stats", timeout=10) as r:
            a = json.loads(r.read())["cascade"]["agreement"]
        assert (a["n"], a["agree"]) == (4, 3) and len(a["ci95"]) == 2
    finally:
        server.should_exit = True
        thread.join(10)
        rm.close()


def test_judge_calls_overlap_the_students_next_batches(tmp_path):
    import threading

    from adaptrubric_local.cascade.scorer import Cascade
    from adaptrubric_local.formats import load_trajectories
    from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig

    recs = []
    for i in range(3):
        make_png(tmp_path / f"s{i}.png", seed=i)
        recs.append({"id": f"r{i}", "instruction": f"Open it (r{i}).", "steps": [{"screenshot": f"s{i}.png"}]})
    trajs = load_trajectories(write_jsonl(tmp_path / "d.jsonl", recs)).trajectories
    second = threading.Event()
    seen: list[bool] = []
    student, judge = _fake({"r0": 1, "r1": 1, "r2": 1}), _fake({"r0": 0, "r1": 1, "r2": 1})
    s_generate, j_generate = student.generate, judge.generate

    def student_generate(requests):
        if len(student.batches) >= 1:
            second.set()  # the student's second batch has started
        return s_generate(requests)

    def judge_generate(requests):
        seen.append(second.wait(5))  # true only when the student went on while the judge was asked
        return j_generate(requests)

    student.generate, judge.generate = student_generate, judge_generate
    cfg = PipelineConfig(router="rules", fine=False, trajectories_per_batch=1)
    cascade = Cascade(AdaptRubric(student, cfg), AdaptRubric(judge, cfg), (0.0, 1.0))  # every verdict escalates
    lines = {v.id: v for ready in cascade.iter_ready(trajs) for v in ready}
    assert seen and all(seen) and lines["r0"].score == 0 and lines["r0"].decided_by == "judge"


def test_the_live_window_holds_only_spot_checks_nothing_else_sent_and_warns_on_the_upper_end(caplog):
    """RewardModel.stats(), GET /stats and the WARNING (cascade/live.py) as docs/student-judge.md says:
    lines the band (or anything else) sent are not in the window, and the warning fires when the upper
    end of the window's 95% interval falls below warn_below, not its lower end."""
    from adaptrubric_local.cascade.config import CascadeConfig
    from adaptrubric_local.cascade.live import LiveCascade
    from adaptrubric_local.dry_run import FakeEngine
    from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig

    live = LiveCascade(AdaptRubric(FakeEngine(), PipelineConfig(router="rules", fine=False)), FakeEngine(),
                       CascadeConfig(warn_below=0.9, agreement_window=50))

    def line(i, why, agrees):
        return CascadeVerdict(id=str(i), score=1, decided_by="judge", escalated=why,
                              student={"status": "ok", "score": 1}, judge={"status": "ok", "score": 1 if agrees else 0})

    def count(lines):
        with caplog.at_level("WARNING", logger="adaptrubric.cascade"):
            live._count(lines)
        return live.stats()["agreement"], [r for r in caplog.records if "live agreement" in r.getMessage()]

    # the band's lines disagree, and some of them were drawn for a spot check too: none is in the window
    a, warned = count([line(i, ["band"], False) for i in range(20)] + [line(i, ["band", "spot_check"], False)
                                                                      for i in range(20, 40)])
    assert a["n"] == 0 and a["rate"] is None and not warned and a["warning"] is False
    # 9 of 10 spot checks agree: the interval is 0.60-0.98, its lower end far below 0.9, its upper end above
    a, warned = count([line(100 + i, ["spot_check"], i != 0) for i in range(10)])
    assert (a["n"], a["agree"]) == (10, 9) and a["ci95"][0] < 0.9 < a["ci95"][1]
    assert a["warning"] is False and not warned  # noise: no warning
    # 5 more that disagree: 9 of 15, upper end 0.80 < 0.9: the warning, once
    a, warned = count([line(200 + i, ["spot_check"], False) for i in range(5)])
    assert (a["n"], a["agree"]) == (15, 9) and a["ci95"][1] < 0.9
    assert a["warning"] is True and len(warned) == 1 and "9/15" in warned[0].getMessage()
    stats = live.stats()
    assert stats["why"] == {"band": 40, "spot_check": 35} and stats["sent_to_judge"] == 55
