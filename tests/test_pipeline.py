"""The orchestrator (pipeline.py) on the scripted engine: config validation and JSON, batching, the
route/cue cache, cost accounting, voting, P(SCORE=1), error verdicts and failure isolation."""
import copy
import dataclasses
import json

import pytest

from adaptrubric_local import AdaptRubric, FakeEngine, PipelineConfig, Verdict, __version__, load_trajectories
from adaptrubric_local.engine.base import Output, TokenProbs
from adaptrubric_local.pipeline import p_success
from adaptrubric_local.types import Step, Trajectory

from conftest import canonical_record, write_jsonl


@pytest.mark.parametrize("kw,msg", [
    ({"router": "x"}, "router must be 'rules' or 'model', got 'x'"),
    ({"max_images": 1}, "max_images must be >= 2 (first and final frame), got 1"),
    ({"trajectories_per_batch": 0}, "trajectories_per_batch must be >= 1, got 0"),
    ({"route_max_new_tokens": 0}, "route_max_new_tokens must be >= 1"),
    ({"cue_max_new_tokens": 0}, "cue_max_new_tokens must be >= 1"),
    ({"verify_max_new_tokens": 0}, "verify_max_new_tokens must be >= 1"),
])
def test_config_validation_messages(kw, msg):
    with pytest.raises(ValueError) as ei:
        PipelineConfig(**kw)
    assert str(ei.value) == msg


def test_config_accepts_the_limits_and_writes_json(tmp_path):
    cfg = PipelineConfig(router="rules", max_images=2, trajectories_per_batch=1, route_max_new_tokens=1,
                         cue_max_new_tokens=1, verify_max_new_tokens=1, fixed_category="transfer")
    p = tmp_path / "c.json"
    cfg.to_json(p)
    text = p.read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "router": "rules",\n')
    d = json.loads(text)
    assert d["package_version"] == __version__ and d["fixed_category"] == "transfer" and d["max_images"] == 2
    helps = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(PipelineConfig)}
    assert helps["max_images"].startswith("screenshot budget M per trajectory (paper: 10")
    assert set(helps) == set(d) - {"package_version"}


OK1 = "SCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"


OK0 = "SCORE: 0\nEVIDENCE_SUFFICIENT: no\nMISSING_EVIDENCE: final_state_ambiguous"


def test_p_success():
    text = "Thinking SCORE: 0 no...\n" + OK1
    off = text.rindex("SCORE: 1") + len("SCORE: ")
    out = Output(text=text, token_probs=[TokenProbs(offset=3, probs={"1": 0.9, "0": 0.1}),
                                         TokenProbs(offset=off, probs={"1": 0.6, "0": 0.2})])
    assert p_success(out) == pytest.approx(0.75)
    assert p_success(Output(text=text, token_probs=[TokenProbs(offset=off, probs={"1": 0.3})])) == pytest.approx(1.0)
    assert p_success(Output(text=text, token_probs=[TokenProbs(offset=off, probs={"0": 0.3})])) == 0.0
    assert p_success(Output(text=text, token_probs=[TokenProbs(offset=off, probs={})])) is None
    assert p_success(Output(text=text, token_probs=[TokenProbs(offset=off + 1, probs={"1": 1.0})])) is None
    assert p_success(Output(text="no verdict", token_probs=[TokenProbs(offset=0, probs={"1": 1.0})])) is None


def _wifi_traj(tmp_path, tid, n=3, instruction="Turn on Wi-Fi."):
    from conftest import make_png
    steps = [Step(screenshot=make_png(tmp_path / f"{tid}_{i}.png", i), action="tap(x)") for i in range(n)]
    return Trajectory(id=tid, instruction=instruction, steps=steps, label=1, platform="android", task_id="T",
                      source="/data/x.jsonl")


def test_verifier_request_and_verdict_fields(tmp_path):
    eng = FakeEngine(script=lambda r: {"verify": OK1, "route": "CATEGORY: state_navigation"}.get(r.kind, "NO_HINT: x"))
    pipe = AdaptRubric(eng, PipelineConfig(verify_max_new_tokens=77))
    t = _wifi_traj(tmp_path, "a")
    p = pipe.prepare(t)
    req = pipe.verifier_request(p)
    assert (req.prompt, req.suffix, req.images) == (p.prompt.text, p.prompt.suffix, p.images)
    assert (req.watch, req.max_new_tokens, req.kind, req.tag, req.stop_after_line) == (
        ("0", "1"), 77, "verify", "a", "MISSING_EVIDENCE:")
    (v,) = pipe.score([t])
    assert (v.id, v.category, v.status, v.score, v.model, v.label, v.platform, v.task_id) == (
        "a", "state_navigation", "ok", 1, "fake", 1, "android", "T")
    assert v.n_images == 3 and v.p_success == pytest.approx(0.9) and v.route_parsed is True
    assert v.bank_sha == pipe.bank.sha and v.hit_cap is False
    s = pipe.summary()
    assert s["calls_by_kind"] == {"route": 1, "cue": 1, "verify": 1} and s["trajectories"] == 1
    assert s["calls"] == 3 and s["calls_per_traj"] == 3.0 and s["hit_cap"] == 0
    assert s["route_unparsed"] == 0 and s["cue_unparsed"] == 0 and "engine" not in s
    assert sum(len(b) for b in eng.batches) == 3
    assert v.cost_calls == pytest.approx(3.0)
    assert s["tokens_per_traj"] == pytest.approx(v.cost_tokens)


def test_engine_error_and_preparation_error_verdicts(tmp_path):
    eng = FakeEngine(fail=lambda r: "boom" if r.kind == "verify" else None)
    pipe = AdaptRubric(eng, PipelineConfig(router="rules"))
    good = _wifi_traj(tmp_path, "g")
    bad = Trajectory(id="b", instruction="x", steps=[Step(screenshot=None, action="tap")])
    v_err, v_bad = pipe.score([good, bad])
    assert (v_err.status, v_err.error) == ("error", "/data/x.jsonl, record g: boom")
    assert v_bad.status == "error" and v_bad.error == "?, record b: trajectory b: no screenshots to select from"
    assert v_bad.model == "fake" and v_bad.n_images == 0


def test_batches_follow_batch_size(tmp_path):
    eng = FakeEngine()
    pipe = AdaptRubric(eng, PipelineConfig(router="rules", trajectories_per_batch=2))
    trajs = [_wifi_traj(tmp_path, f"t{i}", n=2, instruction=f"Open app number {i}.") for i in range(5)]
    ids = [v.id for v in pipe.iter_score(trajs)]
    assert ids == ["t0", "t1", "t2", "t3", "t4"]
    verify_batches = [len(b) for b in eng.batches if b[0].kind == "verify"]
    assert verify_batches == [2, 2, 1]
    assert pipe.summary()["trajectories"] == 5
    with pytest.raises(ValueError, match="scoring needs an engine"):
        list(AdaptRubric(None, PipelineConfig(router="rules")).iter_score(trajs))


def test_summary_reports_engine_stats_and_hit_cap(tmp_path):
    class Capped(FakeEngine):
        stats = {"rows": 1}

        def _one(self, req):
            out = super()._one(req)
            out.hit_cap = req.kind == "verify"
            return out

    pipe = AdaptRubric(Capped(), PipelineConfig(router="rules"))
    (v,) = pipe.score([_wifi_traj(tmp_path, "c")])
    assert v.hit_cap is True
    s = pipe.summary()
    assert s["hit_cap"] == 1 and s["engine"] == {"rows": 1}


def test_pipeline_refuses_unusable_settings_with_clear_messages():
    with pytest.raises(ValueError) as ei:
        AdaptRubric(None, PipelineConfig(router="rules", fixed_category="cooking"))
    families = AdaptRubric(None, PipelineConfig(router="rules")).bank.family_names
    assert str(ei.value) == f"fixed_category must be one of the bank's families ({', '.join(families)}), got 'cooking'"
    with pytest.raises(ValueError) as ei:
        AdaptRubric(None, PipelineConfig(router="model"))
    assert str(ei.value) == ("router='model' (the paper's default) needs an engine; use router='rules' to run "
                             "without a model")
    # a fixed family needs no router, so no engine is needed to route
    pipe = AdaptRubric(None, PipelineConfig(router="model", fixed_category=families[0]))
    assert pipe.route_many(["x"])["x"].category == families[0]


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
    pipe = AdaptRubric(eng, PipelineConfig(router="model", trajectories_per_batch=8))
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


def test_an_unparsed_output_carries_no_probability(groups):
    """A SCORE digit the engine reported a probability for, in a block that does not parse (its
    EVIDENCE_SUFFICIENT line missing, or not yes/no): the verdict is unparsed, with neither a score nor a
    p_success for calibration, ranking or a soft reward to read."""
    block = "SCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none\n"
    bad = iter(["SCORE: 1\nMISSING_EVIDENCE: none\n", "SCORE: 1\nEVIDENCE_SUFFICIENT: maybe\nMISSING_EVIDENCE: none\n"])
    eng = FakeEngine(script=lambda r: next(bad) if r.kind == "verify" else "NO_HINT: ok")
    v = AdaptRubric(eng).score(groups[:2])
    assert all(x.status == "unparsed" and x.score is None and x.p_success is None for x in v), v
    ok = AdaptRubric(FakeEngine(script=lambda r: block if r.kind == "verify" else "NO_HINT: ok")).score(groups[:1])
    assert ok[0].status == "ok" and ok[0].p_success == pytest.approx(0.9)  # the same block, parsed


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


def test_route_and_cue_cache_persists_across_calls(groups):
    """A GRPO trainer calls the scorer once per step: the second call on the same instructions makes
    no router or cue call (the cache is not reset between calls), and its verdicts carry only their
    own verifier cost."""
    eng = FakeEngine()
    pipe = AdaptRubric(eng, PipelineConfig(trajectories_per_batch=4))
    first = pipe.score(groups[:4])
    assert pipe.summary()["calls_by_kind"] == {"route": 1, "cue": 1, "verify": 4}
    assert sum(v.cost_calls for v in first) == pytest.approx(6)
    second = pipe.score(groups[:4])
    assert pipe.summary()["calls_by_kind"] == {"route": 1, "cue": 1, "verify": 8}
    assert all(v.cost_calls == 1.0 for v in second)
    assert [v.score for v in second] == [v.score for v in first]


def test_shared_costs_split_over_the_batch_that_used_them(groups):
    pipe = AdaptRubric(FakeEngine(), PipelineConfig(trajectories_per_batch=12))
    verdicts = pipe.score(groups)
    total = pipe.stats["prompt_tokens"] + pipe.stats["completion_tokens"]
    assert sum(v.cost_tokens for v in verdicts) == pytest.approx(total)
    assert all(v.cost_calls == pytest.approx(1 + 2 / 4) for v in verdicts)  # 3 instructions x 4 rollouts


def test_a_dropped_pipeline_frees_its_engine_without_a_garbage_collection():
    """The criteria reach the engine through a weak reference to the pipeline: no reference cycle keeps a
    dropped pipeline, and the model its engine holds on the GPU, alive until the collector runs."""
    import gc
    import weakref

    from adaptrubric_local import AdaptRubric, FakeEngine, PipelineConfig

    gc.disable()
    try:
        pipe = AdaptRubric(FakeEngine(), PipelineConfig())
        assert pipe.route_many(["Turn on Wi-Fi."])["Turn on Wi-Fi."].mode == "model"  # the criteria call it
        engine = weakref.ref(pipe.engine)
        del pipe
        assert engine() is None
    finally:
        gc.enable()
