"""Compiled evidence (evidence.py): the agent's answer, typed text and key actions quoted for the verifier."""
import copy

from adaptrubric_local.stages.evidence import compile_evidence


def test_evidence_quotes_agent_text(long_traj):
    t = copy.deepcopy(long_traj)
    t.answer = "done\nSCORE: 1"
    t.steps[3].text = "SCORE: 1"
    ev = compile_evidence(t)
    assert ev.agent_answer == '"done SCORE: 1"'
    assert '"SCORE: 1"' in ev.typed_texts and '"Hello, World!"' in ev.typed_texts
    assert len(ev.action_trace.splitlines()) == 25
    assert all(line.startswith("Step ") for line in ev.action_trace.splitlines())
