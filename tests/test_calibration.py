"""Is p_success any good, and calibrating it: AUROC / AUPRC / Brier / ECE checked against hand
computation on a crafted verdict file (through `adaptrubric eval`), temperature scaling that lowers
held-out ECE on a synthetic over-confident verifier, and the calibration file travelling through
`calibrate --apply`, `score --calibration`, RewardModel, the reward service and best-of-N."""
import dataclasses
import json
import math
import random
import re
import subprocess
import sys
import urllib.request

import numpy as np
import pytest

from adaptrubric_local import FakeEngine, PipelineConfig, Verdict, load_trajectories
from adaptrubric_local.cli import main
from adaptrubric_local.engine import build
from adaptrubric_local.evaluation import calibration as C
from adaptrubric_local.evaluation import probability as P
from adaptrubric_local.evaluation import tts
from adaptrubric_local.rewards.model import RewardModel

from conftest import free_port, make_png, wait_until_loaded, write_jsonl

# ----------------------------------------------------------------------------- the crafted file
# id: (p_success, label). No probability sits on a bin edge k/15.
CRAFTED = {"a": (0.95, 1), "b": (0.85, 0), "c": (0.70, 1), "d": (0.62, 1),
           "e": (0.42, 0), "f": (0.42, 1), "g": (0.10, 0), "h": (0.10, 0)}

# AUROC by counting, for each positive, the negatives it outranks (a tie counts 1/2):
#   a 0.95 > b, e, g, h = 4;  c 0.70 > e, g, h = 3;  d 0.62 > e, g, h = 3;  f 0.42 = e (1/2), > g, h = 2.5
HAND_AUROC = (4 + 3 + 3 + 2.5) / (4 * 4)  # 0.78125
# AUPRC (average precision) over the distinct thresholds, highest first (recall steps of 1/4):
#   0.95: a+  -> P 1/1, R 1/4 | 0.85: b- (R unchanged) | 0.70: c+ -> P 2/3, R 2/4 | 0.62: d+ -> P 3/4, R 3/4
#   0.42: e-, f+ together -> P 4/6, R 4/4 | 0.10: g-, h- (R unchanged)
HAND_AUPRC = 0.25 * 1 + 0.25 * (2 / 3) + 0.25 * (3 / 4) + 0.25 * (4 / 6)  # 37/48
# Brier: squared errors 0.05^2, 0.85^2, 0.30^2, 0.38^2, 0.42^2, 0.58^2, 0.10^2, 0.10^2
HAND_BRIER = (0.0025 + 0.7225 + 0.09 + 0.1444 + 0.1764 + 0.3364 + 0.01 + 0.01) / 8  # 0.186525
# ECE, 15 bins of width 1/15: a alone in bin 14 (|1 - 0.95|), b in 12 (|0 - 0.85|), c in 10 (|1 - 0.70|),
# d in 9 (|1 - 0.62|), e and f in 6 (mean p 0.42, half positive: |0.5 - 0.42|), g and h in 1 (|0 - 0.10|)
HAND_ECE = (0.05 + 0.85 + 0.30 + 0.38) / 8 + 2 / 8 * 0.08 + 2 / 8 * 0.10  # 0.2425


def _figure(name):
    return lambda ps, ys: P.figures(np.asarray(ps, dtype=float), np.asarray(ys))[name]


_fig = {name: _figure(name) for name in ("auroc", "auprc", "brier", "ece", "reliability")}


def test_figures_by_hand():
    ps, ys = [p for p, _ in CRAFTED.values()], [y for _, y in CRAFTED.values()]
    assert _fig["auroc"](ps, ys) == pytest.approx(HAND_AUROC) == pytest.approx(0.78125)
    assert _fig["auprc"](ps, ys) == pytest.approx(HAND_AUPRC) == pytest.approx(37 / 48)
    assert _fig["brier"](ps, ys) == pytest.approx(HAND_BRIER)
    assert _fig["ece"](ps, ys) == pytest.approx(HAND_ECE) == pytest.approx(0.2425)
    rows = {round(r["lo"] * 15): (r["n"], r["frac_pos"]) for r in _fig["reliability"](ps, ys)}
    assert rows == {14: (1, 1.0), 12: (1, 0.0), 10: (1, 1.0), 9: (1, 1.0), 6: (2, 0.5), 1: (2, 0.0)}


def test_figures_edge_cases():
    assert _fig["auroc"]([0.3, 0.6], [1, 1]) is None and _fig["auprc"]([0.3], [0]) is None
    assert _fig["ece"]([], []) is None
    assert _fig["auroc"]([0.2, 0.8], [0, 1]) == 1.0 and _fig["auroc"]([0.5, 0.5], [0, 1]) == 0.5
    assert [r["lo"] * 15 for r in _fig["reliability"]([0.0, 1.0], [0, 1])] == [0, 14]  # 1.0: the last bin
    with pytest.raises(ValueError, match="outside"):
        _fig["brier"]([1.2], [1])


def _crafted_run(tmp_path):
    shot = make_png(tmp_path / "img" / "s.png", seed=1)
    recs = [{"id": i, "instruction": f"Task {i}.", "label": y, "platform": "android",
             "steps": [{"screenshot": "img/s.png", "action": "tap(x)"}]} for i, (_, y) in CRAFTED.items()]
    recs.append({"id": "i", "instruction": "Task i.", "label": 1,
                 "steps": [{"screenshot": "img/s.png", "action": "x"}]})
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    verdicts = [Verdict(id=i, score=int(p >= 0.5), p_success=p) for i, (p, _) in CRAFTED.items()]
    verdicts.append(Verdict(id="i", status="unparsed", raw="no verdict"))  # labelled, no probability
    verdicts.append(Verdict(id="z", score=1, p_success=0.99))  # not in the data: left out with --allow-extra
    vfile = write_jsonl(tmp_path / "v.jsonl", [json.dumps(v.to_dict()) for v in verdicts])
    assert shot
    return data, vfile


def test_eval_prints_the_hand_computed_figures(tmp_path, capsys):
    data, vfile = _crafted_run(tmp_path)
    assert main(["eval", str(data), "--verdicts", str(vfile), "--out", str(tmp_path / "e"), "--quiet",
                 "--allow-extra"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("p_success over"))
    assert "over 8 labelled verdicts" in line
    printed = {k: float(v) for k, v in re.findall(r"(AUROC|AUPRC|Brier|ECE)=([0-9.]+)", line)}
    hand = {"AUROC": HAND_AUROC, "AUPRC": HAND_AUPRC, "Brier": HAND_BRIER, "ECE": HAND_ECE}
    assert printed == pytest.approx(hand, abs=5e-5)  # printed with 4 decimals
    saved = json.loads((tmp_path / "e" / "metrics.json").read_text())["probability"]["p_success"]
    assert (saved["auroc"], saved["auprc"], saved["brier"], saved["ece"]) == pytest.approx(
        (HAND_AUROC, HAND_AUPRC, HAND_BRIER, HAND_ECE))
    assert saved["n"] == 8 and saved["without_probability"] == 1 and saved["ece_bins"] == 15
    report = (tmp_path / "e" / "report.md").read_text()
    assert "| p_success | 8 | 4 | 0.781 | 0.771 | 0.1865 | 0.2425 | 1 |" in report
    assert "![reliability diagram](calibration.png)" in report and (tmp_path / "e" / "calibration.png").stat().st_size


def test_compare_draws_both_reliability_diagrams(tmp_path, capsys):
    data, vfile = _crafted_run(tmp_path)
    cal = tmp_path / "c.json"
    C.Calibration(method="temperature", a=0.5).save(cal)
    assert main(["calibrate", "--apply", str(cal), "--verdicts", str(vfile), "--out", str(tmp_path / "vc.jsonl")]) == 0
    for name, v in (("A", vfile), ("B", tmp_path / "vc.jsonl")):
        assert main(["eval", str(data), "--verdicts", str(v), "--out", str(tmp_path / name), "--quiet",
                     "--no-review", "--allow-extra"]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B"), "--out", str(tmp_path / "cmp")]) == 0
    text = capsys.readouterr().out
    assert (tmp_path / "cmp" / "calibration.png").stat().st_size > 0
    assert re.search(r"^p_success\.auroc\s+0\.78\s+0\.78\s+\+0\.00$", text, re.M)
    assert re.search(r"^p_success_calibrated\.auroc\s+-\s+0\.78\s+-$", text, re.M)  # order kept: same AUROC
    assert not (tmp_path / "A" / "review.html").exists()


# ----------------------------------------------------------------------------- fitting
def _overconfident(n: int, seed: int, sharpen: float = 3.0):
    """Labels drawn with a true probability q; the verifier reports sigmoid(3 logit q): too sure."""
    rng = random.Random(seed)
    ps, ys = [], []
    for _ in range(n):
        q = rng.uniform(0.02, 0.98)
        ys.append(int(rng.random() < q))
        ps.append(1 / (1 + math.exp(-sharpen * math.log(q / (1 - q)))))
    return ps, ys


def test_temperature_scaling_lowers_held_out_ece():
    dev_p, dev_y = _overconfident(600, seed=1)
    test_p, test_y = _overconfident(3000, seed=2)
    cal = C.fit(dev_p, dev_y, "temperature")
    assert cal.temperature == pytest.approx(3.0, abs=0.3)  # recovers the sharpening
    calibrated = [cal.apply(p) for p in test_p]
    before, after = _fig["ece"](test_p, test_y), _fig["ece"](calibrated, test_y)
    print(f"held-out ECE {before:.4f} -> {after:.4f} (T = {cal.temperature:.3f})")
    # measured: 0.1487 -> 0.0289; 0.02 is about the sampling floor of ECE on 3,000 verdicts
    assert before > 0.13 and after < 0.04 and before - after > 0.1
    assert _fig["brier"](calibrated, test_y) < _fig["brier"](test_p, test_y)
    # an increasing map: the same ranking
    assert _fig["auroc"](calibrated, test_y) == pytest.approx(_fig["auroc"](test_p, test_y))
    platt = C.fit(dev_p, dev_y, "platt")
    assert _fig["ece"]([platt.apply(p) for p in test_p], test_y) < 0.04 and abs(platt.b) < 0.3


def test_an_under_confident_verifier_is_sharpened():
    ps, ys = _overconfident(800, seed=3, sharpen=0.5)
    cal = C.fit(ps, ys)
    assert cal.temperature == pytest.approx(0.5, abs=0.1) and cal.after["ece"] < cal.before["ece"]


def test_fit_refuses_too_little_or_one_class():
    with pytest.raises(ValueError, match="at least 20"):
        C.fit([0.9] * 5 + [0.1] * 5, [1] * 5 + [0] * 5)
    with pytest.raises(ValueError, match="same label"):
        C.fit([0.9] * 30, [1] * 30)


def test_calibration_file_errors_name_file_and_field(tmp_path):
    bad = tmp_path / "c.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="c.json: not JSON"):
        C.load(bad)
    bad.write_text(json.dumps({"method": "temperature", "a": 1.0}))
    with pytest.raises(ValueError, match="field 'format'"):
        C.load(bad)
    bad.write_text(json.dumps({"format": C.FORMAT, "method": "temperature", "a": -2.0}))
    with pytest.raises(ValueError, match=r"c.json: a \(1/temperature\) must be a positive"):
        C.load(bad)
    bad.write_text(json.dumps({"format": C.FORMAT, "method": "temperature", "a": 1.0, "colour": 3}))
    with pytest.raises(ValueError, match="unknown field.*colour"):
        C.load(bad)
    with pytest.raises(FileNotFoundError):
        C.load(tmp_path / "none.json")


# ----------------------------------------------------------------------------- the command and provenance
def _labelled_data(tmp_path, labels):
    make_png(tmp_path / "img" / "s.png", seed=2)
    recs = [{"id": f"t{i}", "instruction": f"Task {i}.", "label": y, "steps": [{"screenshot": "img/s.png",
                                                                                  "action": "tap"}]}
            for i, y in enumerate(labels)]
    return write_jsonl(tmp_path / "dev.jsonl", recs)


def test_calibrate_command_fits_and_applies(tmp_path, capsys):
    ps, ys = _overconfident(300, seed=4)
    data = _labelled_data(tmp_path, ys)
    verdicts = [Verdict(id=f"t{i}", score=int(p >= 0.5), p_success=p) for i, p in enumerate(ps)]
    vfile = write_jsonl(tmp_path / "v.jsonl", [json.dumps(v.to_dict()) for v in verdicts])
    (tmp_path / "v.config.json").write_text(json.dumps({"model": "m", "max_images": 10}))
    cal_path = tmp_path / "calib.json"
    assert main(["calibrate", str(data), "--verdicts", str(vfile), "--out", str(cal_path)]) == 0
    out = capsys.readouterr().out
    cal, prov = C.load(cal_path)
    assert "temperature scaling on 300 labelled verdicts" in out and cal.n == 300
    assert cal.fitted_on["verdicts_sha256"] == C.file_sha256(vfile) and cal.after["ece"] < cal.before["ece"]
    applied = tmp_path / "vc.jsonl"
    assert main(["calibrate", "--apply", str(cal_path), "--verdicts", str(vfile), "--out", str(applied)]) == 0
    lines = [json.loads(x) for x in (tmp_path / "vc.jsonl").read_text().splitlines()]
    assert [d["p_success"] for d in lines] == ps  # the raw value is kept beside the calibrated one
    assert all(d["p_success_calibrated"] == pytest.approx(cal.apply(d["p_success"])) for d in lines)
    sidecar = json.loads((tmp_path / "vc.config.json").read_text())
    assert sidecar["calibration"]["sha256"] == prov["sha256"] and sidecar["model"] == "m"
    assert main(["calibrate", "--apply", str(cal_path), "--verdicts", str(vfile), "--out", str(vfile)]) == 2


@pytest.fixture
def fake(monkeypatch):
    eng = FakeEngine(name="fake-model", p_score=lambda req, digit: 0.97 if digit == "1" else 0.2)
    eng.close = lambda: None
    monkeypatch.setattr(build, "build_engine", lambda **kw: eng)
    return eng


def test_score_writes_calibrated_probability_and_records_the_hash(fake, tmp_path, capsys):
    data = _labelled_data(tmp_path, [1, 0, 1])
    cal_path = tmp_path / "calib.json"
    sha = C.Calibration(method="temperature", a=0.5).save(cal_path)
    out = tmp_path / "v.jsonl"
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--calibration", str(cal_path),
                 "--router", "rules", "--no-fine"]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    # T = 2: logit(0.97) = 3.476 -> 1.738 -> 0.8504
    assert all(r["p_success"] == pytest.approx(0.97) for r in rows)
    assert all(r["p_success_calibrated"] == pytest.approx(1 / (1 + math.exp(-math.log(0.97 / 0.03) / 2))) for r in rows)
    assert rows[0]["p_success_calibrated"] == pytest.approx(0.8504, abs=1e-4)
    cfg = json.loads((tmp_path / "v.config.json").read_text())
    assert cfg["calibration"]["sha256"] == sha == C.file_sha256(cal_path)
    # resuming with another calibration file is a different configuration
    C.Calibration(method="temperature", a=0.25).save(cal_path)
    assert main(["score", str(data), "--model", "m", "--out", str(out), "--quiet", "--calibration", str(cal_path),
                 "--router", "rules", "--no-fine", "--resume"]) == 2
    assert "calibration" in capsys.readouterr().err


def test_reward_model_soft_reward_uses_the_calibration(synth_set, tmp_path):
    trajs = load_trajectories(synth_set).trajectories[:3]
    cal_path = tmp_path / "calib.json"
    C.Calibration(method="temperature", a=0.5).save(cal_path)
    eng = FakeEngine(p_score=lambda req, digit: 0.97 if digit == "1" else 0.2)
    RULES = PipelineConfig(router="rules", fine=False)
    raw = RewardModel(engine=eng, reward="soft", pipeline=RULES)
    cal = RewardModel(engine=eng, reward="soft", pipeline=RULES, calibration=str(cal_path))
    expected = 1 / (1 + math.exp(-math.log(0.97 / 0.03) / 2))
    assert raw.rewards(trajs) == pytest.approx([0.97] * 3)
    assert cal.rewards(trajs) == pytest.approx([expected] * 3)
    v = cal.score(trajs[:1])[0]
    assert (v.p_success, v.p_success_calibrated) == pytest.approx((0.97, expected))
    assert cal.stats["provenance"]["calibration"]["sha256"] == C.file_sha256(cal_path)
    binary = RewardModel(engine=eng, pipeline=RULES, calibration=str(cal_path))
    assert binary.rewards(trajs) == [1.0] * 3  # the binary reward is the SCORE, calibrated or not
    with pytest.raises(FileNotFoundError):
        RewardModel(engine=eng, calibration=str(tmp_path / "none.json"))
    for rm in (raw, cal, binary):
        rm.close()
    from adaptrubric_local import rewards  # the RL adapters' soft reward goes through the same RewardModel

    rewards.configure(engine=eng, reward="soft", router="rules", fine=False, calibration=str(cal_path))
    try:
        assert rewards.trl_reward(completions=[""] * 2, trajectory=[t.to_dict() for t in trajs[:2]]) == pytest.approx(
            [expected] * 2)
    finally:
        rewards.configure(engine=FakeEngine())


def test_bestofn_soft_uses_the_calibrated_probability():
    a = Verdict(id="a", score=1, p_success=0.9, p_success_calibrated=0.6, label=0, task_id="T")
    b = Verdict(id="b", score=1, p_success=0.8, p_success_calibrated=0.7, label=1, task_id="T")
    # made-up calibrated values that reverse the order show which field is read
    assert tts.bestofn([a, b], 2, soft=True).id == "b"
    a, b = (dataclasses.replace(x, p_success_calibrated=None) for x in (a, b))
    assert tts.bestofn([a, b], 2, soft=True).id == "a"


def test_serve_with_calibration(synth_set, tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    cal_path = tmp_path / "calib.json"
    sha = C.Calibration(method="temperature", a=0.5).save(cal_path)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "adaptrubric_local.cli", "serve", "--fake-engine", "--port",
                             str(port), "--calibration", str(cal_path), "--reward", "p_success", "--router",
                             "rules", "--no-fine",
                             "--image-roots", str(synth_set.parent)],  # the service reads only these folders
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        health = wait_until_loaded(url, proc)
        assert health["stats"]["provenance"]["calibration"]["sha256"] == sha
        traj = load_trajectories(synth_set).trajectories[0].to_dict()
        req = urllib.request.Request(url + "/score", data=json.dumps({"trajectories": [traj]}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            body = json.loads(r.read())
        v = body["verdicts"][0]
        # the fake engine's P(SCORE=1) is 0.9: T = 2 gives sigmoid(logit(0.9) / 2) = 0.75
        assert v["p_success"] == pytest.approx(0.9) and v["p_success_calibrated"] == pytest.approx(0.75)
        assert body["rewards"] == pytest.approx([0.75])
    finally:
        proc.terminate()
        proc.wait(30)


def test_calibrate_fits_on_the_data_sets_verdicts_only(tmp_path, capsys):
    """Verdicts for ids --data does not hold carry the labels they were scored with: fitting on them would mix
    another data set's labels in unseen, so they are refused (as eval refuses them), or left out with
    --allow-extra, which then fits exactly what a file without them fits."""
    ps, ys = _overconfident(300, seed=5)
    data = _labelled_data(tmp_path, ys[:200])  # t0-t199
    verdicts = [Verdict(id=f"t{i}", score=int(p >= 0.5), p_success=p, label=ys[i]) for i, p in enumerate(ps)]
    vfile = write_jsonl(tmp_path / "v.jsonl", [json.dumps(v.to_dict()) for v in verdicts])
    own = write_jsonl(tmp_path / "own.jsonl", [json.dumps(v.to_dict()) for v in verdicts[:200]])
    args = ["calibrate", str(data), "--out"]
    assert main([*args, str(tmp_path / "c.json"), "--verdicts", str(vfile)]) == 2
    assert "holds verdicts for 100 id(s) that are not in" in capsys.readouterr().err
    assert main([*args, str(tmp_path / "c.json"), "--verdicts", str(vfile), "--allow-extra"]) == 0
    assert "100 verdict id(s)" in capsys.readouterr().err
    assert main([*args, str(tmp_path / "own.json"), "--verdicts", str(own)]) == 0
    a, b = C.load(tmp_path / "c.json")[0], C.load(tmp_path / "own.json")[0]
    assert a.n == b.n == 200 and a.temperature == b.temperature


# ----------------------------------------------------------------------------- a fit that erases the signal
def _uninformative(n=65, seed=0):
    """Verdicts that say nothing about their labels: every p_success about 0.78, labels a coin toss."""
    rng = random.Random(seed)
    return [round(0.78 + rng.uniform(-0.02, 0.02), 4) for _ in range(n)], [int(rng.random() < 0.5) for _ in range(n)]


def test_signal_problems_name_the_bound_and_the_near_constant_spread():
    ps, ys = _uninformative()
    flat = C.fit(ps, ys)
    assert flat.temperature == pytest.approx(1 / C.A_MIN) and flat.after["std"] < 1e-3  # every p about 0.5003
    problems = " ".join(C.signal_problems(flat))
    assert "bound T = 1000" in problems and "near-constant on the 65 fitting verdicts" in problems
    assert "constant reward: no learning signal" in problems
    informative = C.fit(*_overconfident(300, seed=4))
    assert informative.after["std"] > 0.2 and C.signal_problems(informative) == []
    # the spread alone (a slope inside its bound), judged against the stated threshold
    narrow = C.Calibration(method="temperature", a=0.5, n=40, after={"std": 0.03, "min": 0.45, "max": 0.56})
    text = " ".join(C.signal_problems(narrow))
    assert "standard deviation 0.0300, from 0.4500 to 0.5600 (below 0.05" in text and "bound" not in text
    assert C.signal_problems(narrow, min_spread=0.02) == []


def test_calibrate_warns_on_uninformative_verdicts_and_require_signal_makes_it_an_error(tmp_path, capsys):
    ps, ys = _uninformative()
    data = _labelled_data(tmp_path, ys)
    vfile = write_jsonl(tmp_path / "v.jsonl", [json.dumps(Verdict(id=f"t{i}", score=1, p_success=p).to_dict())
                                               for i, p in enumerate(ps)])
    fit = ["calibrate", str(data), "--verdicts", str(vfile), "--out"]
    assert main([*fit, str(tmp_path / "flat.json")]) == 0
    out, err = capsys.readouterr()
    assert "T=1000.000" in out and "WARNING: the fit reached its bound T = 1000" in err
    assert "constant reward: no learning signal" in err and "--require-signal makes this an error" in err
    assert (tmp_path / "flat.json").is_file()
    assert main([*fit, str(tmp_path / "strict.json"), "--require-signal"]) == 1
    err = capsys.readouterr().err
    assert "adaptrubric: error: the fit reached its bound" in err and "strict.json not written" in err
    assert not (tmp_path / "strict.json").exists()
    # applying a flat calibration: the same warning, and the same error with --require-signal
    apply = ["calibrate", "--apply", str(tmp_path / "flat.json"), "--verdicts", str(vfile), "--out"]
    assert main([*apply, str(tmp_path / "vc.jsonl")]) == 0
    assert "WARNING: the fit reached its bound" in capsys.readouterr().err
    lines = (tmp_path / "vc.jsonl").read_text().splitlines()
    assert len(lines) == 65 and {round(json.loads(x)["p_success_calibrated"], 4) for x in lines} == {0.5003}
    assert main([*apply, str(tmp_path / "vc2.jsonl"), "--require-signal"]) == 1
    assert not (tmp_path / "vc2.jsonl").exists()


def test_calibrate_on_informative_verdicts_does_not_warn(tmp_path, capsys):
    ps, ys = _overconfident(300, seed=4)
    data = _labelled_data(tmp_path, ys)
    vfile = write_jsonl(tmp_path / "v.jsonl", [json.dumps(Verdict(id=f"t{i}", score=int(p >= 0.5), p_success=p)
                                                          .to_dict()) for i, p in enumerate(ps)])
    assert main(["calibrate", str(data), "--verdicts", str(vfile), "--out", str(tmp_path / "c.json"),
                 "--require-signal"]) == 0
    out, err = capsys.readouterr()
    assert "WARNING" not in err and "error" not in err and (tmp_path / "c.json").is_file()
    assert re.search(r"p_success std 0\.\d{4} -> 0\.\d{4}", out)


def test_calibrate_help_gives_the_measured_range_and_the_stated_thresholds(capsys):
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Fit on 50-200 labelled verdicts" in text and "few hundred" not in text
    assert f"bound {1 / C.A_MIN:g}" in text and f"below {C.MIN_SPREAD:g}" in text
    with pytest.raises(ValueError, match="50-200 for a stable fit"):
        C.fit([0.9] * 5 + [0.1] * 5, [1] * 5 + [0] * 5)
