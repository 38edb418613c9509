"""The evaluation harness (evaluation/harness.py): the ablation rows' deltas against values worked out
by hand."""
import pytest

from adaptrubric_local import AdaptRubric, FakeEngine, PipelineConfig, load_trajectories
from adaptrubric_local.evaluation import harness

from conftest import canonical_record, write_jsonl


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
