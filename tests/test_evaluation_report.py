"""What the evaluation reports say (evaluation/report.py, harness.py): the paper-comparable headline
beside scored-only figures, the inputs of each ablation row, compare across result folders old and
new, and cost accounting that agrees between `score` and `eval`."""
import json

import pytest

from adaptrubric_local import AdaptRubric, FakeEngine, PipelineConfig, Verdict
from adaptrubric_local.evaluation import harness, report

from conftest import canonical_record, write_jsonl


def V(id, label, score=None, status="ok", platform="android"):
    return Verdict(id=id, label=label, score=score if status == "ok" else None, status=status, platform=platform,
                   prompt_tokens=50, completion_tokens=5, n_images=2)


def _write(path, verdicts):
    path.write_text("".join(json.dumps(v.to_dict()) + "\n" for v in verdicts))
    return path


def test_report_says_when_nothing_was_scored(tmp_path):
    vs = [V("a", 1, status="unparsed"), V("b", 0, status="unparsed"), V("c", 0, status="error")]
    m = harness.run_eval(_write(tmp_path / "v.jsonl", vs), tmp_path / "e")
    assert m["overall"]["acc"] == pytest.approx(200 / 3) and m["overall"]["scored_only"]["acc"] is None
    text = (tmp_path / "e" / "report.md").read_text()
    assert "No verdict was scored" in text and "2 unparsed and 1 error verdict(s)" in text


def test_ablation_report_describes_each_rows_inputs(monkeypatch):
    from adaptrubric_local.stages import fusion

    o = {"acc": 50.0, "f1": 40.0, "scored": 2, "unparsed": 0, "errors": 0}
    rows = {k: {"overall": o, "delta": {}} for k in ("full", "no_fine", "no_coarse", "no_both")}
    text = report.ablation_markdown(rows, {})
    lines = {line.split(":")[0]: line for line in text.splitlines() if line.startswith("- ")}
    assert "screenshots" in lines["- w/o Both"] and "no action trace" in lines["- w/o Both"]
    assert "no cue block" in lines["- w/o Fine"]
    assert "no family rubric, no meta rule" in lines["- w/o Coarse"]
    for part in ("compiled evidence", "action trace", "family rubric", "cue", "screenshots"):
        assert part in lines["- Full (Coarse + Fine)"]
    monkeypatch.setattr(fusion, "ABLATION_INPUTS", {"no_both": "the prompt module's own words"}, raising=False)
    assert "- w/o Both: the prompt module's own words" in report.ablation_markdown(rows, {})


def test_eval_and_score_agree_on_cost(tmp_path):
    if "cost_tokens" not in Verdict.__dataclass_fields__:
        pytest.skip("Verdict has no cost_tokens field yet (the pipeline does not record per-trajectory costs)")
    from adaptrubric_local.scoring import score_file

    # two trajectories share an instruction: one router call and one cue call serve both
    recs = [canonical_record(tmp_path, f"t{k}", 3, instruction="Turn on Wi-Fi." if k < 2 else "Delete the note.",
                             label=k % 2) for k in range(3)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    pipe = AdaptRubric(FakeEngine(), PipelineConfig(router="model", dedupe_frames=False))
    summary = score_file(pipe, data, tmp_path / "v.jsonl", progress=False)
    e = harness.run_eval(tmp_path / "v.jsonl", tmp_path / "e", data)["efficiency"]
    assert e["accounting"].startswith("all model calls")
    assert e["tokens_per_traj"] == pytest.approx(summary["tokens_per_traj"])
    assert e["calls_per_traj"] == pytest.approx(summary["calls_per_traj"]) == pytest.approx((2 + 2 + 3) / 3)
