"""The orchestrator on the fake engine: batching, caching, accounting, and failure isolation."""
import copy

import pytest

from adaptrubric_local import AdaptRubric, FakeEngine, PipelineConfig, Verdict, load_trajectories
from adaptrubric_local.cli import main

from conftest import canonical_record, write_jsonl


@pytest.fixture
def groups(tmp_path):
    """12 trajectories: 3 tasks x 4 rollouts sharing an instruction."""
    recs = []
    for task, ins in enumerate(["Turn on Bluetooth.", "Delete the note Foo.", "How many contacts do I have?"]):
        for k in range(4):
            recs.append(canonical_record(tmp_path, f"g{task}_{k}", 3 + k, instruction=ins, task_id=f"task{task}",
                                         label=k % 2))
    return load_trajectories(write_jsonl(tmp_path / "g.jsonl", recs)).trajectories


def test_calls_per_traj_with_route_and_cue_cache(groups):
    eng = FakeEngine()
    pipe = AdaptRubric(eng, PipelineConfig(router="model", batch_size=8))
    verdicts = pipe.score(groups)
    s = pipe.summary()
    assert len(verdicts) == 12 and all(v.status == "ok" for v in verdicts)
    assert s["calls_by_kind"] == {"route": 3, "cue": 3, "verify": 12}
    assert s["calls_per_traj"] <= 1.5
    assert [len(b) for b in eng.batches if b[0].kind == "verify"] == [8, 4]


def test_verdict_fields(groups):
    v = AdaptRubric(FakeEngine()).score(groups[:1])[0]
    assert isinstance(v, Verdict) and v.score == 1 and v.p_success == pytest.approx(0.9)
    assert v.category == "state_navigation" and v.bank_sha and v.model == "fake"
    assert v.label == 0 and v.task_id == "task0" and v.n_images == 3


def test_unparsed_output_is_not_a_score(groups):
    eng = FakeEngine(script=lambda r: "I think it worked." if r.kind == "verify" else "NO_HINT: fine")
    v = AdaptRubric(eng).score(groups[:2])
    assert all(x.status == "unparsed" and x.score is None and x.p_success is None for x in v)


def test_one_bad_trajectory_keeps_the_others(groups):
    bad = copy.deepcopy(groups[1])
    bad.steps[0].screenshot = "/nonexistent/corrupt.png"
    eng = FakeEngine(fail=lambda r: "cannot decode image" if "/nonexistent/corrupt.png" in r.images else None)
    verdicts = AdaptRubric(eng, PipelineConfig(dedupe_frames=False)).score([groups[0], bad, groups[2]])
    assert [v.status for v in verdicts] == ["ok", "error", "ok"]
    assert "cannot decode image" in verdicts[1].error and bad.id in verdicts[1].error
    assert verdicts[1].score is None


def test_prepare_failure_becomes_error_verdict(groups):
    bad = copy.deepcopy(groups[0])
    bad.steps[1].screenshot = "/nonexistent/x.png"  # fingerprinting for (opt-in) dedupe cannot open it
    verdicts = AdaptRubric(FakeEngine(), PipelineConfig(dedupe_frames=True)).score([bad, groups[1]])
    assert verdicts[0].status == "error" and "x.png" in verdicts[0].error and verdicts[1].status == "ok"


def test_config_validation_and_json(tmp_path):
    with pytest.raises(ValueError, match="router"):
        PipelineConfig(router="llm")
    with pytest.raises(ValueError, match="max_images"):
        PipelineConfig(max_images=1)
    PipelineConfig(coarse=False).to_json(tmp_path / "c.json")
    assert '"coarse": false' in (tmp_path / "c.json").read_text()


def test_prompt_cli_json(tmp_path, capsys):
    import json

    rec = canonical_record(tmp_path, "p1", 14, instruction="Delete all notes in Joplin.")
    path = write_jsonl(tmp_path / "p.jsonl", [rec])
    assert main(["prompt", str(path), "--id", "p1", "--router", "rules", "--cue", "Check if the note list is empty.",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["category"] == "delete_cleanup" and len(out["images"]) == 10 and out["router"] == "rules"
    assert "Check if the note list is empty." in out["prompt"]
    assert main(["prompt", str(path), "--id", "nope", "--router", "rules", "--no-fine"]) == 2
    # the paper's default routes and writes cues with the model: without one, say so instead of guessing
    assert main(["prompt", str(path), "--id", "p1"]) == 2
    assert "give --model" in capsys.readouterr().err


def test_route_and_cue_cache_persists_across_calls(groups):
    """A GRPO trainer calls the scorer once per step: the second call on the same instructions makes
    no router or cue call (the cache is not reset between calls), and its verdicts carry only their
    own verifier cost."""
    eng = FakeEngine()
    pipe = AdaptRubric(eng, PipelineConfig(batch_size=4))
    first = pipe.score(groups[:4])
    assert pipe.summary()["calls_by_kind"] == {"route": 1, "cue": 1, "verify": 4}
    assert sum(v.cost_calls for v in first) == pytest.approx(6)
    second = pipe.score(groups[:4])
    assert pipe.summary()["calls_by_kind"] == {"route": 1, "cue": 1, "verify": 8}
    assert all(v.cost_calls == 1.0 for v in second)
    assert [v.score for v in second] == [v.score for v in first]


def test_shared_costs_split_over_the_batch_that_used_them(groups):
    pipe = AdaptRubric(FakeEngine(), PipelineConfig(batch_size=12))
    verdicts = pipe.score(groups)
    total = pipe.stats["prompt_tokens"] + pipe.stats["completion_tokens"]
    assert sum(v.cost_tokens for v in verdicts) == pytest.approx(total)
    assert all(v.cost_calls == pytest.approx(1 + 2 / 4) for v in verdicts)  # 3 instructions x 4 rollouts
