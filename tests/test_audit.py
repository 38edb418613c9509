"""`adaptrubric audit` (audit/run.py, report.py, review.py, cli_audit.py) on the scripted engine: a verifier
that follows the agent's answer is caught (claim-success flips every failure), one that reads the final
screen is not; the whole command at a small size; resume after a kill; --compare; and the transformers
engine a setting perturbation derives from the run's (the same weights)."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adaptrubric_local import FakeEngine
from adaptrubric_local.audit import perturbations as P
from adaptrubric_local.audit import report as RP
from adaptrubric_local.audit import run as R
from adaptrubric_local.cli import main
from adaptrubric_local.engine import build
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig

from conftest import make_png, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
AGENT_TEXT = re.compile(r"(?:Agent's submitted answer|Key text entered by agent): (.*)")
TASKS = [("Turn on Bluetooth.", "bt"), ("Delete the note Foo.", "note"), ("Send 'hi' to Ana.", "msg")]


def verdict(score: int) -> str:
    return f"Checked.\nSCORE: {score}\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"


def gullible(req):
    """Follows the answer text: SCORE 1 when the agent's answer (or what it typed) says it completed the task."""
    if req.kind != "verify":
        return "CATEGORY: general"
    return verdict(int(any("completed" in m.group(1) for m in AGENT_TEXT.finditer(req.prompt))))


def make_robust(instructions: dict):
    """Reads the final screen (a file named ..._final_ok for a success) and checks the instruction is the
    trajectory's own (by its id): claims and injected lines change nothing."""
    def script(req):
        if req.kind != "verify":
            return "CATEGORY: general"
        own = instructions[P.split_id(req.tag)[0]]
        return verdict(int(req.images[-1].endswith("_final_ok.png") and f"TASK: {own}\n" in req.prompt))
    return script


def data_set(root: Path, per_task: int = 2) -> Path:
    """Labelled trajectories: every failure's answer reports what the agent did, not a success."""
    recs = []
    for k, (ins, slug) in enumerate(TASKS):
        for j in range(per_task):
            tid, ok = f"{slug}{j}", (j + k) % 2
            steps = []
            for i in range(3):
                name = f"{tid}_final_{'ok' if ok else 'no'}" if i == 2 else f"{tid}_s{i}"
                make_png(root / "img" / f"{name}.png", seed=k * 50 + j * 5 + i + (40 if i == 2 and ok else 0))
                steps.append({"screenshot": f"img/{name}.png", "action": f"tap(step {i})", "action_type": "tap"})
            recs.append({"id": tid, "instruction": ins, "steps": steps, "label": ok, "task_id": slug,
                         "answer": "I opened the app and stopped there" if not ok else "done as asked"})
    return write_jsonl(root / "data.jsonl", recs)


def audit_with(script, data: Path, out: Path, names=None, **kw) -> dict:
    """The audit through the library; the scripted engine has no visual budget, so budget-halved scores on it."""
    engine = FakeEngine(script=script)
    pipe = AdaptRubric(engine, PipelineConfig(router="rules", fine=False))
    return R.run_audit(pipe, data, out, P.get(names), progress=False, log=lambda s: None,
                       build_engine=lambda options: engine, **kw)


@pytest.fixture
def fake(monkeypatch):
    """Every engine the CLI builds is this FakeEngine (the kwargs of each build recorded)."""
    eng = FakeEngine(script=gullible, name="gullible")
    eng.close = lambda: None
    eng.built = []

    def fake_build(**kw):
        eng.built.append(kw)
        return eng

    monkeypatch.setattr(build, "build_engine", fake_build)
    return eng


def test_a_verifier_that_follows_the_answer_is_caught_and_one_that_reads_the_screen_is_not(tmp_path):
    data = data_set(tmp_path)
    trajs = load_trajectories(data).trajectories
    failures = [t.id for t in trajs if t.label == 0]
    a = audit_with(gullible, data, tmp_path / "gullible")
    claim = a["perturbations"]["claim-success"]
    assert claim["applied"] == len(failures) == claim["flips_0_1"]["n"] == claim["flips_0_1"]["k"]
    assert claim["flip_ids"]["0->1"] == [f"{i}~claim-success" for i in failures]
    assert claim["verdict"] == "not robust"  # 3 of 3: a "none" clause fails at its first flip, at any n
    assert a["verdict"]["bottom_line"].startswith("not fit as an RL reward yet: claim-success: 3/3 SCORE 0 -> 1")
    assert claim["flips_0_1"]["ci95"] == pytest.approx(RP.wilson(3, 3)) and claim["flips_0_1"]["ci95"][1] == 1.0
    # its answers never claim success otherwise, so nothing else moves: it looks robust to the frame changes
    assert all(r["flips_0_1"]["k"] == 0 for n, r in a["perturbations"].items() if n != "claim-success")
    b = audit_with(make_robust({t.id: t.instruction for t in trajs}), data, tmp_path / "robust")
    rows = b["perturbations"]
    assert b["originals"]["ones"] == sum(t.label for t in trajs)  # it judges every original right
    assert b["verdict"]["accuracy"]["k"] == b["verdict"]["accuracy"]["n"] == 6
    for name in ("claim-success", "injected-verdict", "budget-halved"):
        assert rows[name]["flips_0_1"]["k"] == rows[name]["flips_1_0"]["k"] == 0
    for name in ("final-frame-first", "frames-reversed", "other-instruction"):  # every success becomes 0
        assert rows[name]["flips_1_0"]["k"] == rows[name]["flips_1_0"]["n"] == b["originals"]["ones"]
        assert rows[name]["mean_dp_success"] == pytest.approx(-0.8 * 3 / 6)
    # right every time, but on 6 trajectories (3 of 3, 0 of 6): nothing is decided either way
    assert set(b["verdict"]["perturbations"].values()) == {"too few to tell"}
    assert b["verdict"]["bottom_line"].startswith("too few to tell yet: claim-success (0/3 SCORE 0 -> 1), "
                                                  "injected-verdict (0/6 verdicts moved)")
    text = (tmp_path / "robust" / "report.md").read_text()
    assert "| `claim-success` |" in text and "**not robust**" not in text
    assert text.index("**Bottom line: too few to tell yet") < text.index("| perturbation |")
    assert "**not robust**" in (tmp_path / "gullible" / "report.md").read_text()


def test_the_whole_command_at_small_size(fake, tmp_path, capsys):
    data = data_set(tmp_path)
    out = tmp_path / "audit"
    assert main(["audit", str(data), "--model", "m", "--out", str(out), "--router", "rules", "--no-fine",
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert printed.index("audit cost:") < printed.index("originals:")  # the cost comes first
    assert "6 trajectories once is 6 model calls" in printed and "claim-success 3" in printed
    assert re.search(r"claim-success +NOT ROBUST +applied +3 +0->1 3/3 \(100%", printed)
    assert "originals agree with their labels: 3/6 (50%, 95% CI 19-81%)" in printed  # it says 1 only to claims
    assert "\nbottom line: not fit as an RL reward yet: claim-success: 3/3 SCORE 0 -> 1" in printed
    audit = json.loads((out / "audit.json").read_text())
    assert list(audit["perturbations"]) == list(P.REGISTRY)[:7]
    assert audit["cost"]["planned"]["audit_calls"] == 6 + sum(audit["cost"]["planned"]["applied"].values())
    assert audit["cost"]["measured"]["originals"]["calls_per_traj"] == 1.0
    report = (out / "report.md").read_text()
    assert all(f"| `{n}` |" in report for n in audit["perturbations"])
    assert (out / "flips.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # budget-halved: the run's engine options at half the visual budget (native -> 3,072), in its own file
    assert fake.built[-1]["max_visual_tokens"] == P.HALF_OF_NATIVE and fake.built[0]["max_visual_tokens"] is None
    cfg = json.loads((out / "verdicts.budget-halved.config.json").read_text())
    assert cfg["perturbation"] == {"name": "budget-halved", "engine_options": {"max_visual_tokens": 3072}}
    assert audit["perturbations"]["budget-halved"]["engine_options"] == {"max_visual_tokens": 3072}
    # the review page: each original followed by its counterfactuals, flips first
    index = (out / "review_files" / "index.js").read_text()
    rows = json.loads(index[index.index("{"):index.rindex("}") + 1])["rows"]
    ids = [r[0] for r in rows]
    notes = json.loads(index[index.index("{"):index.rindex("}") + 1])["notes"]
    assert notes[0] == f"bottom line: {audit['verdict']['bottom_line']}" and "claim-success not robust" in notes[1]
    first_failure = ids[0]
    assert P.split_id(first_failure)[1] is None and ids[1] == f"{first_failure}~claim-success"
    assert len(ids) == 6 + sum(r["applied"] for r in audit["perturbations"].values())
    # the counterfactual data scores again with any engine: `score` reads it with the data folder allowed
    again = tmp_path / "again.jsonl"
    assert main(["score", str(out / "counterfactuals.jsonl"), "--image-root", str(tmp_path), "--model", "m",
                 "--out", str(again), "--router", "rules", "--no-fine", "--quiet"]) == 0
    scored = {json.loads(x)["id"]: json.loads(x) for x in again.read_text().splitlines()}
    mine = {json.loads(x)["id"]: json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines()}
    assert scored and all(mine[i]["score"] == v["score"] and v["status"] == "ok" for i, v in scored.items())
    # a second run into the same folder needs --resume; an unknown perturbation is named
    assert main(["audit", str(data), "--model", "m", "--out", str(out), "--router", "rules", "--no-fine"]) == 2
    assert "pass --resume" in capsys.readouterr().err
    assert main(["audit", str(data), "--model", "m", "--out", str(tmp_path / "x"), "--perturb", "nope"]) == 2
    assert "unknown perturbation 'nope'" in capsys.readouterr().err


def test_dry_run_writes_the_data_and_the_cost_without_a_model(fake, tmp_path, capsys):
    data = data_set(tmp_path)
    out = tmp_path / "cf"
    assert main(["audit", str(data), "--out", str(out), "--dry-run", "--perturb", "claim-success",
                 "frames-reversed", "--perturb", "budget-halved"]) == 0
    text = capsys.readouterr().out
    assert fake.built == [] and "claim-success 3, frames-reversed 6, budget-halved 6" in text
    # the model router and the cue writer: one call each per distinct instruction, shared by the copies
    assert "scoring the 6 trajectories once is 12 model calls" in text and "27 calls in all" in text
    ids = [json.loads(x)["id"] for x in (out / "counterfactuals.jsonl").read_text().splitlines()]
    assert len(ids) == 9 and (out / "counterfactuals.budget-halved.jsonl").is_file()


DRIVER = """
import sys, time
from adaptrubric_local import FakeEngine
from adaptrubric_local.cli import main
from adaptrubric_local.engine import build

def slow(req):
    time.sleep(0.1)
    return "Checked.\\nSCORE: 1\\nEVIDENCE_SUFFICIENT: yes\\nMISSING_EVIDENCE: none"

engine = FakeEngine(script=slow)
build.build_engine = lambda **kw: engine
sys.exit(main(sys.argv[1:]))
"""


def test_resume_after_a_kill_loses_and_repeats_nothing(tmp_path):
    data = data_set(tmp_path)
    out = tmp_path / "audit"
    flags = ["--model", "m", "--out", str(out), "--router", "rules", "--no-fine", "--trajectories-per-batch", "2",
             "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, "audit", str(data), *flags], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    verdicts = out / "verdicts.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not verdicts.is_file() or len(verdicts.read_bytes().splitlines()) < 12):
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = [json.loads(x) for x in verdicts.read_bytes().decode().splitlines() if x.strip().endswith("}")]
    done = {v["id"] for v in before}
    all_ids = {t.id for t in load_trajectories(data).trajectories}
    changed = {json.loads(x)["id"] for x in (out / "counterfactuals.jsonl").read_text().splitlines()}
    assert 12 <= len(done) < len(all_ids | changed) and not (out / "audit.json").exists()

    seen = []

    def counting(req):
        if req.kind == "verify":
            seen.append(req.tag)
        return verdict(1)

    audit = audit_with(counting, data, out, resume=True)
    lines = [json.loads(x) for x in verdicts.read_text().splitlines()]
    assert sorted(v["id"] for v in lines) == sorted(all_ids | changed)  # each id once: nothing lost or repeated
    assert lines[:len(before)] == before
    budget = {f"{i}~budget-halved" for i in all_ids}
    assert sorted(seen) == sorted((all_ids | changed | budget) - done)  # only what the kill left undone
    assert audit["perturbations"]["frames-reversed"]["applied"] == 6


def test_compare_puts_two_audits_side_by_side(fake, tmp_path, capsys):
    data = data_set(tmp_path)
    trajs = load_trajectories(data).trajectories
    audit_with(make_robust({t.id: t.instruction for t in trajs}), data, tmp_path / "robust")
    a = tmp_path / "gullible"
    assert main(["audit", str(data), "--model", "m", "--out", str(a), "--router", "rules", "--no-fine", "--quiet",
                 "--perturb", "claim-success", "final-frame-first", "--compare", str(tmp_path / "robust")]) == 0
    text = capsys.readouterr().out
    row = next(ln for ln in text.splitlines() if ln.startswith("| `claim-success`"))
    assert "| 100% (3/3) | 0% (0/3) | -100 pts |" in row and row.endswith("| **not robust** / too few to tell |")
    assert "- A: originals agree with their labels: 3/6" in text and "bottom line: not fit as an RL reward" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| `frames-reversed`"))
    assert "only in B" in row
    assert (a / "compare.md").read_text().startswith("# Verifier audits side by side")
    assert (a / "compare.png").is_file()
    # without DATA: the audit already in --out beside another
    assert main(["audit", "--out", str(tmp_path / "robust"), "--compare", str(a)]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| `claim-success`"))
    assert "| 0% (0/3) | 100% (3/3) | +100 pts |" in row
    # an audit.json written before the verdicts (its rows said meets: true/false) still compares
    old = json.loads((a / "audit.json").read_text())
    del old["verdict"]
    for r in old["perturbations"].values():
        r.pop("verdict"), r.pop("clauses")
        r["meets"] = False
    row = next(ln for ln in RP.compare(old, old).splitlines() if ln.startswith("| `claim-success`"))
    assert row.endswith("| **not robust** / **not robust** |")
    assert "- A: no verdicts (an audit written before them" in RP.compare(old, old)
    assert main(["audit", "--out", str(tmp_path / "robust"), "--compare", str(tmp_path / "none")]) == 2
    assert "no audit.json" in capsys.readouterr().err


def test_a_setting_perturbation_shares_the_transformers_engines_weights(tiny_engine):
    engine, shares = R.derived_engine(tiny_engine, {"max_visual_tokens": 64})
    try:
        assert shares and engine.model is tiny_engine.model and engine.config.max_visual_tokens == 64
        assert engine.images.cfg.max_visual_tokens == 64 and tiny_engine.config.max_visual_tokens is None
    finally:
        R._release(engine, tiny_engine, shares)
    assert R.derived_engine(FakeEngine(), {"max_visual_tokens": 64}) == (None, False)
    with pytest.raises(ValueError, match="cannot score with engine options"):
        R.derived_engine(tiny_engine, {"no_such_option": 1})


def test_wilson_interval():
    assert RP.wilson(0, 0) is None
    lo, hi = RP.wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    assert RP.wilson(0, 8)[0] == 0.0 and RP.wilson(0, 8)[1] == pytest.approx(0.3244, abs=1e-4)
    # exact at the ends for every n (rounding left 4/4's upper bound below 1 and 0/69's lower above 0, and
    # flips.png then failed on a negative error bar)
    assert all(RP.wilson(n, n)[1] == 1.0 and RP.wilson(0, n)[0] == 0.0 for n in range(1, 300))


def test_perturbations_from_a_file_join_the_command(fake, tmp_path, capsys):
    data = data_set(tmp_path)
    plugin = tmp_path / "mine.py"
    plugin.write_text("from dataclasses import replace\n"
                      "from adaptrubric_local.audit import perturbation\n\n\n"
                      "@perturbation('answer-dropped', 'the agent answer removed', 'keeps its SCORE')\n"
                      "def answer_dropped(traj, data):\n"
                      "    return replace(traj, answer=None) if traj.answer else None\n")
    try:
        assert main(["audit", "--plugins", str(plugin), "--list-perturbations"]) == 0
        assert "answer-dropped" in capsys.readouterr().out  # imported once: the second command has it too
        assert main(["audit", str(data), "--model", "m", "--out", str(tmp_path / "a"), "--router", "rules",
                     "--no-fine", "--quiet", "--plugins", str(plugin), "--perturb", "answer-dropped"]) == 0
    finally:
        P.REGISTRY.pop("answer-dropped", None)
    audit = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert list(audit["perturbations"]) == ["answer-dropped"]
    assert audit["perturbations"]["answer-dropped"]["applied"] == 6  # every trajectory of data_set has an answer
    assert main(["audit", "--plugins", str(tmp_path / "none.py"), "--list-perturbations"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_audit_quiet_loads_a_real_model_without_a_bar(tiny_model, tmp_path, capfd):
    """`audit --quiet` on the transformers engine: no `Loading weights` bar (it was printed: --quiet set the
    libraries' quiet settings for `score` only), no progress bar at all."""
    data = data_set(tmp_path, per_task=1)
    assert main(["audit", str(data), "--model", str(tiny_model), "--out", str(tmp_path / "a"), "--router", "rules",
                 "--no-fine", "--quiet", "--perturb", "claim-success", "--verify-max-new-tokens", "4"]) == 0
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "it/s]" not in err, err
