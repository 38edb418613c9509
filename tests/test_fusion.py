"""The fused verifier prompt (fusion.py): the full prompt for a 25-step trajectory, the four ablation rows
of Table 4, and `fuse` called directly giving what the pipeline sends."""
from adaptrubric_local import FakeEngine
from adaptrubric_local.bank import load_bank
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.prompts import load_prompts
from adaptrubric_local.stages.evidence import compile_evidence
from adaptrubric_local.stages.fusion import fuse

THREE_LINES = ("SCORE: [0/1]\nEVIDENCE_SUFFICIENT: [yes/no]\nMISSING_EVIDENCE: [source_missing | sink_missing | "
               "final_state_ambiguous | answer_format_mismatch | global_count_unverified | subgoal_unverified | none]")


def _prompt(traj, **cfg):
    pipe = AdaptRubric(FakeEngine(), PipelineConfig(**cfg))
    return pipe, pipe.prepare(traj)


def test_full_prompt_for_25_step_trajectory(long_traj):
    cue = "Pay attention to whether Hello, World! appears before any other text in the note."
    _pipe, p = _prompt(long_traj, manual_cues=[cue])
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
