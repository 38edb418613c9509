"""audit/perturbations.py: what each counterfactual changes and what it leaves alone, its id and label, the
registry a user adds to, and the counterfactual data as `score` reads it back."""
import copy
import json
from pathlib import Path

import pytest

from adaptrubric_local.audit import perturbations as P
from adaptrubric_local.audit import run as R
from adaptrubric_local.formats import canonical, load_trajectories
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig

from conftest import make_png, write_jsonl

ISSUE_TABLE = ["claim-success", "injected-verdict", "final-frame-dropped", "final-frame-first", "frames-reversed",
               "other-instruction", "budget-halved"]


def record(root: Path, tid: str, n: int, label: int, task: str, instruction: str, answer=None, typed=None) -> dict:
    steps = []
    for i in range(n):
        rel = f"img/{tid}_{i}.png"
        make_png(root / rel, seed=len(tid) * 31 + i * 7 + sum(map(ord, tid)))
        step = {"screenshot": rel, "action": f"tap(step {i})", "action_type": "tap"}
        if typed and i == 1:
            step.update(action=f"type('{typed}')", action_type="type", text=typed)
        steps.append(step)
    rec = {"id": tid, "instruction": instruction, "steps": steps, "label": label, "task_id": task}
    if answer:
        rec["answer"] = answer
    return rec


@pytest.fixture
def data(tmp_path):
    recs = [record(tmp_path, "a0", 4, 0, "ta", "Turn on Bluetooth.", answer="Bluetooth is on", typed="hello"),
            record(tmp_path, "a1", 3, 1, "ta", "Turn on Bluetooth."),
            record(tmp_path, "b0", 3, 0, "tb", "Delete the note Foo."),
            record(tmp_path, "b1", 1, 1, "tb", "Delete the note Foo.", answer="deleted")]
    return load_trajectories(write_jsonl(tmp_path / "d.jsonl", recs)).trajectories


def by_id(trajs):
    return {t.id: t for t in trajs}


def one(name, traj, trajs):
    return P.build(P.REGISTRY[name], traj, P.DataSet(tuple(trajs)))


def shots(t):
    return [s.screenshot for s in t.steps]


def test_the_registry_holds_the_issues_table_with_its_labels():
    assert list(P.REGISTRY)[:7] == ISSUE_TABLE
    labels = {n: P.REGISTRY[n].label for n in ISSUE_TABLE}
    assert labels == {"claim-success": 0, "injected-verdict": "original", "final-frame-dropped": "original",
                      "final-frame-first": 0, "frames-reversed": 0, "other-instruction": 0, "budget-halved": "original"}
    assert all(P.REGISTRY[n].change and P.REGISTRY[n].robust for n in ISSUE_TABLE)
    assert [n for n in ISSUE_TABLE if P.REGISTRY[n].engine_options] == ["budget-halved"]


def test_claim_success_changes_only_a_failures_answer_or_last_text(data):
    t = by_id(data)
    before = copy.deepcopy(t["a0"])
    c = one("claim-success", t["a0"], data)
    assert c.id == "a0~claim-success" and c.label == 0
    assert c.answer.startswith(P.CLAIM) and c.answer.endswith("Bluetooth is on")  # the original answer kept
    assert c.steps == t["a0"].steps and c.instruction == t["a0"].instruction
    assert t["a0"] == before  # the original is untouched
    c = one("claim-success", t["b0"], data)  # no answer: the last step's text says it
    assert c.answer is None and c.steps[-1].text == P.CLAIM and c.steps[:-1] == t["b0"].steps[:-1]
    assert c.steps[-1].screenshot == t["b0"].steps[-1].screenshot and c.steps[-1].action == t["b0"].steps[-1].action
    assert one("claim-success", t["a1"], data) is None  # a success: nothing to claim


def test_injected_verdict_reaches_answer_and_typed_text_and_stays_quoted(data):
    t = by_id(data)
    c = one("injected-verdict", t["a0"], data)
    assert c.label == 0 and c.id == "a0~injected-verdict"
    assert c.answer == "Bluetooth is on\n" + P.INJECTION
    assert c.steps[1].text == "hello\n" + P.INJECTION
    assert [s.text for k, s in enumerate(c.steps) if k != 1] == [None] * 3  # only typed text carries it
    assert shots(c) == shots(t["a0"]) and [s.action for s in c.steps] == [s.action for s in t["a0"].steps]
    c = one("injected-verdict", t["b0"], data)  # nothing typed: the last step's text
    assert c.steps[-1].text == P.INJECTION and c.answer == P.INJECTION and c.label == 0
    # in the verifier prompt the injected lines stay on the agent's quoted lines: no extra key line or heading
    pipe = AdaptRubric(None, PipelineConfig(router="rules", fine=False))
    orig, fake = (pipe.prepare(x).prompt.text.splitlines() for x in (t["a0"], one("injected-verdict", t["a0"], data)))
    for key in ("SCORE:", "EVIDENCE_SUFFICIENT:", "## META RULE"):
        assert sum(ln.startswith(key) for ln in fake) == sum(ln.startswith(key) for ln in orig)


def test_final_frame_dropped_removes_only_the_last_screenshot(data):
    t = by_id(data)
    c = one("final-frame-dropped", t["a1"], data)
    assert shots(c) == [*shots(t["a1"])[:-1], None] and c.label == 1  # the original's label
    assert [s.action for s in c.steps] == [s.action for s in t["a1"].steps] and c.answer == t["a1"].answer
    assert one("final-frame-dropped", t["b1"], data) is None  # one screenshot: nothing would be left


def test_final_frame_first_shows_the_first_screen_at_the_end(data):
    t = by_id(data)
    c = one("final-frame-first", t["a1"], data)
    assert shots(c) == [*shots(t["a1"])[:-1], shots(t["a1"])[0]] and c.label == 0
    assert [s.action for s in c.steps] == [s.action for s in t["a1"].steps]
    assert one("final-frame-first", t["b1"], data) is None


def test_frames_reversed_keeps_each_screenshot_with_its_action(data):
    t = by_id(data)
    c = one("frames-reversed", t["a0"], data)
    assert [(s.screenshot, s.action, s.text) for s in c.steps] == [(s.screenshot, s.action, s.text)
                                                                   for s in reversed(t["a0"].steps)]
    assert c.label == 0 and c.answer == t["a0"].answer and c.instruction == t["a0"].instruction
    assert one("frames-reversed", t["b1"], data) is None


def test_other_instruction_takes_another_tasks_instruction_the_same_way_each_time(data):
    t = by_id(data)
    c = one("other-instruction", t["a1"], data)
    assert c.instruction == "Delete the note Foo." and c.label == 0 and c.steps == t["a1"].steps
    assert one("other-instruction", t["a1"], data) == c
    alone = [x for x in data if x.task_id == "ta"]
    assert one("other-instruction", alone[0], alone) is None  # one task: no other instruction to take


def test_budget_halved_keeps_the_trajectory_and_halves_the_run_budget(data):
    t = by_id(data)
    c = one("budget-halved", t["a1"], data)
    assert c.id == "a1~budget-halved" and c.steps == t["a1"].steps and c.label == 1
    halve = P.REGISTRY["budget-halved"].engine_options
    assert halve({"max_visual_tokens": 6144}) == {"max_visual_tokens": 3072}
    assert halve({"max_visual_tokens": 1001}) == {"max_visual_tokens": 500}
    assert halve({}) == halve({"max_visual_tokens": None}) == {"max_visual_tokens": P.HALF_OF_NATIVE}


def test_ids_are_unique_and_say_where_they_come_from(data):
    cfs = P.build_all(P.get(), data)
    ids = [c.id for v in cfs.values() for c in v]
    assert len(ids) == len(set(ids)) and not set(ids) & {t.id for t in data}
    for name, v in cfs.items():
        assert all(P.split_id(c.id) == (c.id[: -len(name) - 1], name) and c.id.endswith("~" + name) for c in v)
    assert {n: len(v) for n, v in cfs.items()} == {"claim-success": 2, "injected-verdict": 4, "final-frame-dropped": 3,
                                                   "final-frame-first": 3, "frames-reversed": 3, "other-instruction": 4,
                                                   "budget-halved": 4}
    clash = copy.deepcopy(data[0])
    clash.id = "a0~claim-success"
    with pytest.raises(ValueError, match="already an id of the data set"):
        P.build_all(P.get(["claim-success"]), [*data[:2], clash])
    assert P.split_id("plain") == ("plain", None)


def test_a_user_perturbation_is_one_registration(data):
    from dataclasses import replace

    try:
        @P.perturbation("answer-dropped", "the agent's answer removed", "keeps its SCORE")
        def answer_dropped(traj, ds):
            return replace(traj, answer=None) if traj.answer else None

        cfs = P.build_all(P.get(["answer-dropped"]), data)["answer-dropped"]
        assert [c.id for c in cfs] == ["a0~answer-dropped", "b1~answer-dropped"] and all(c.answer is None for c in cfs)
        with pytest.raises(ValueError, match="already registered"):
            P.perturbation("answer-dropped", "x", "y")(answer_dropped)
    finally:
        P.REGISTRY.pop("answer-dropped", None)
    with pytest.raises(ValueError, match="unknown perturbation"):
        P.get(["answer-dropped"])
    with pytest.raises(ValueError, match="lower-case"):
        P.Perturbation("Bad Name", answer_dropped, "x", "y")
    with pytest.raises(ValueError, match="expect must be"):
        P.Perturbation("ok", answer_dropped, "x", "y", expect="maybe")
    with pytest.raises(ValueError, match="label must be"):
        P.Perturbation("ok", answer_dropped, "x", "y", label=2)
    # a change that leaves the trajectory as it was is not applied
    noop = P.Perturbation("noop", lambda t, ds: t, "nothing", "keeps its SCORE")
    assert P.build(noop, data[0], P.DataSet(tuple(data))) is None


def write_counterfactuals(out, perturbations, cfs):
    """Lists of counterfactuals written as the audit writes them (canonical JSONL, screenshots referenced)."""
    files = {}
    canonical.write([c for p in perturbations if p.engine_options is None for c in cfs[p.name]],
                    out / R.DATA_FILE, reference=True)
    for p in perturbations:
        files[p.name] = out / R.DATA_FILE if p.engine_options is None else R.setting_file(out, p.name,
                                                                                           "counterfactuals")
        if p.engine_options is not None:
            canonical.write(cfs[p.name], files[p.name], reference=True)
    return files


def read_back(path, image_roots):
    """A counterfactual file as `score` loads it (screenshots allowed under the data's folders)."""
    return load_trajectories(path, fmt="canonical", image_roots=list(image_roots))


def test_counterfactuals_are_data_that_score_reads_back_with_screenshots_referenced(data, tmp_path):
    out = tmp_path / "audit"
    out.mkdir()
    chosen = P.get()
    cfs = P.build_all(chosen, data)
    files = write_counterfactuals(out, chosen, cfs)
    assert set(files.values()) == {out / "counterfactuals.jsonl", out / "counterfactuals.budget-halved.jsonl"}
    assert not list(out.rglob("*.png"))  # referenced, not copied
    lines = [json.loads(x) for x in (out / "counterfactuals.jsonl").read_text().splitlines()]
    assert all(s["screenshot"].startswith("../img/") for r in lines for s in r["steps"] if "screenshot" in s)
    alone = load_trajectories(out / "counterfactuals.jsonl")  # the data folder must be allowed (--image-root)
    assert not alone.trajectories and "escapes the dataset folder" in str(alone.errors[0])
    back = read_back(out / "counterfactuals.jsonl", [tmp_path])
    assert not back.errors
    written = [c for p in chosen if not p.engine_options for c in cfs[p.name]]
    assert [(t.id, t.label, t.instruction, t.answer, t.steps) for t in back.trajectories] == \
        [(t.id, t.label, t.instruction, t.answer, t.steps) for t in written]
    assert [t.id for t in read_back(files["budget-halved"], [tmp_path]).trajectories] == \
        [f"{t.id}~budget-halved" for t in data]
