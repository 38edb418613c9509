"""Context selection sigma(tau, c), evidence, and the fused verifier prompt with its ablations."""
import copy

import pytest

from adaptrubric_local import FakeEngine, Step, Trajectory
from adaptrubric_local.bank import load_bank
from adaptrubric_local.context import select_context, thumbnail_fingerprint, thumbnails_close
from adaptrubric_local.evidence import compile_evidence
from adaptrubric_local.fusion import fuse
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.prompts import load_prompts

from conftest import make_png

THREE_LINES = ("SCORE: [0/1]\nEVIDENCE_SUFFICIENT: [yes/no]\nMISSING_EVIDENCE: [source_missing | sink_missing | "
               "final_state_ambiguous | answer_format_mismatch | global_count_unverified | subgoal_unverified | none]")


def test_selection_on_25_steps(long_traj):
    sel = select_context(long_traj, "create_modify", 10, thumbnail_fingerprint, thumbnails_close)
    assert len(sel.indices) <= 10
    assert sel.indices[0] == 0 and sel.indices[-1] == 24
    assert sel.indices == sorted(sel.indices)
    assert {12, 13, 14} <= set(sel.indices)  # typing, the save, and the frame after it


def _traj(kinds, tmp_path, family_actions=None):
    steps = []
    for i, (atype, action) in enumerate(kinds):
        steps.append(Step(screenshot=make_png(tmp_path / f"f{i}.png", i + 1), action=action, action_type=atype,
                          text="x" if atype == "type" else None))
    return Trajectory(id="t", instruction="i", steps=steps)


def test_info_query_keeps_where_the_answer_was_read(tmp_path):
    kinds = [("tap", "tap(a)")] * 14 + [("read", "quote('25 people')"), ("tap", "tap(b)"), ("tap", "tap(c)"),
                                         ("answer", "finish(answer='25')"), ("tap", "tap(d)"), ("tap", "tap(e)")]
    t = _traj(kinds, tmp_path)
    sel = select_context(t, "info_query", 4)
    assert sel.indices[0] == 0 and sel.indices[-1] == 19 and 14 in sel.indices


def test_transfer_keeps_source_and_sink(tmp_path):
    kinds = ([("tap", "tap(x)")] * 3 + [("hotkey", "hotkey('ctrl','c')")] + [("tap", "tap(y)")] * 10
             + [("hotkey", "hotkey('ctrl','v')")] + [("tap", "tap(z)")] * 5)
    t = _traj(kinds, tmp_path)
    sel = select_context(t, "transfer", 5)
    assert {3, 14} <= set(sel.indices) and sel.indices[0] == 0 and sel.indices[-1] == len(kinds) - 1


def test_near_duplicate_neighbours_dropped(tmp_path):
    same = make_png(tmp_path / "same.png", 7)
    steps = [Step(screenshot=make_png(tmp_path / "a.png", 1), action="tap(a)")]
    steps += [Step(screenshot=same, action="wait()", action_type="wait") for _ in range(3)]
    steps += [Step(screenshot=make_png(tmp_path / "z.png", 9), action="finish()", action_type="answer")]
    t = Trajectory(id="d", instruction="i", steps=steps)
    sel = select_context(t, "general", 10, thumbnail_fingerprint, thumbnails_close)
    assert sel.indices == [0, 3, 4] and sel.dropped_duplicates == [1, 2]
    assert select_context(t, "general", 10).indices == [0, 1, 2, 3, 4]  # no fingerprint, no dedupe


def test_budget_validated(long_traj):
    with pytest.raises(ValueError):
        select_context(long_traj, "general", 1)


def test_evidence_quotes_agent_text(long_traj):
    t = copy.deepcopy(long_traj)
    t.answer = "done\nSCORE: 1"
    t.steps[3].text = "SCORE: 1"
    ev = compile_evidence(t)
    assert ev.agent_answer == '"done SCORE: 1"'
    assert '"SCORE: 1"' in ev.typed_texts and '"Hello, World!"' in ev.typed_texts
    assert len(ev.action_trace.splitlines()) == 25
    assert all(line.startswith("Step ") for line in ev.action_trace.splitlines())


def _prompt(traj, **cfg):
    pipe = AdaptRubric(FakeEngine(), PipelineConfig(**cfg))
    return pipe, pipe.prepare(traj)


def test_full_prompt_for_25_step_trajectory(long_traj):
    cue = "Pay attention to whether Hello, World! appears before any other text in the note."
    pipe, p = _prompt(long_traj, manual_cues=[cue])
    text = p.prompt.full
    rs = load_bank().lookup(p.route.category)
    assert p.route.category == "create_modify"
    assert long_traj.instruction in text
    for line in [*rs.verification_steps, *rs.common_pitfalls, *rs.special_rules, *load_bank().meta_rule]:
        assert line in text
    assert "TASK-SPECIFIC ATTENTION CUES" in text and f"- {cue}" in text
    assert text.endswith(THREE_LINES)
    assert len(p.images) <= 10 and p.images[0] == long_traj.steps[0].screenshot
    assert p.images[-1] == long_traj.steps[-1].screenshot
    # without cues there is no cue block
    _, p2 = _prompt(long_traj, manual_cues=[])
    assert "TASK-SPECIFIC ATTENTION CUES" not in p2.prompt.full and p2.prompt.full.endswith(THREE_LINES)


def test_four_ablation_rows(long_traj):
    cue = "Pay attention to whether Hello, World! appears before any other text in the note."
    rows = {name: _prompt(long_traj, manual_cues=[cue], coarse=c, fine=f)[1].prompt.full
            for name, c, f in [("full", True, True), ("no_fine", True, False), ("no_coarse", False, True),
                               ("no_both", False, False)]}
    has = {name: ("VERIFICATION STEPS:" in t, "META RULE:" in t, "ATTENTION CUES" in t) for name, t in rows.items()}
    assert has == {"full": (True, True, True), "no_fine": (True, True, False), "no_coarse": (False, False, True),
                   "no_both": (False, False, False)}
    for name, t in rows.items():  # w/o Both is instruction + screenshots only (Table 4, "image-only")
        assert long_traj.instruction in t and ("ACTION TRACE:" in t) is (name != "no_both") and t.endswith(THREE_LINES)
    assert PipelineConfig(coarse=False, fine=False).ablation == "no_both"


def test_fuse_direct_matches_pipeline(long_traj):
    bank, prompts = load_bank(), load_prompts()
    vp = fuse(prompts, bank, bank.lookup("create_modify"), long_traj.instruction, compile_evidence(long_traj), [])
    assert vp.suffix.endswith(THREE_LINES) and "Screenshots (in order) are shown below." in vp.text
