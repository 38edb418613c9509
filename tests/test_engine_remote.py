"""The verifier on an OpenAI-compatible server (engine/remote.py): `score/eval/ablate/tts/serve
--openai-url URL --model NAME`, `RewardModel(openai_url=...)` and `openai_url:` in a reward config,
against a scripted server on loopback (tests/openai_stub.py) that judges each trajectory by the pixels
it was sent. The whole method runs there: one router call and one cue call per distinct instruction,
one verifier call per trajectory; p_success from the SCORE digit's logprobs when the server returns
them, null when not; token counts from `usage`; the URL and served model in the run's record; the API
key from the environment only, and in no file or log."""
import json
import logging
import subprocess
import sys

import pytest
from openai_stub import CUE, P_FAIL, P_PASS, Running, Stub, file_pixels

from adaptrubric_local.cli import main
from adaptrubric_local.engine.remote import RemoteConfig, check_remote
from adaptrubric_local.rewards.model import RewardModel

from conftest import make_png, write_jsonl

SECRET = "sk-remote-test-secret-4242"
INSTRUCTIONS = ["Turn on Wi-Fi (phone 1).", "Turn on Bluetooth (phone 2).", "Enable dark mode (phone 3)."]


@pytest.fixture
def data(tmp_path):
    """Two rollouts (one pass, one fail) of each of three instructions, three distinct frames each:
    (the JSONL, the records, pixel hashes of each trajectory's frames, the stub's scores by final frame)."""
    recs, frames, scores = [], {}, {}
    for k, ins in enumerate(INSTRUCTIONS):
        for label in (1, 0):
            tid = f"t{k}{label}"
            steps = [{"screenshot": f"img/{tid}_{i}.png", "action": f"tap({i})", "action_type": "tap"}
                     for i in range(3)]
            for i, s in enumerate(steps):
                make_png(tmp_path / s["screenshot"], seed=10 * (2 * k + label) + i)
            frames[tid] = [file_pixels(tmp_path / s["screenshot"]) for s in steps]
            scores[frames[tid][-1]] = label
            recs.append({"id": tid, "instruction": ins, "steps": steps, "label": label, "task_id": f"task{k}"})
    return write_jsonl(tmp_path / "trajs.jsonl", recs), recs, frames, scores


@pytest.fixture
def server(data):
    running = Running(Stub(data[3], served="qwen3-vl-8b"))
    yield running
    running.close()


def _verdicts(path) -> dict:
    return {d["id"]: d for d in map(json.loads, path.read_text().splitlines())}


def test_score_runs_the_method_on_the_server(data, server, tmp_path, monkeypatch, capsys, caplog):
    path, recs, frames, _ = data
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)  # every logger, the openai client's and httpx's included
    out = tmp_path / "run" / "v.jsonl"
    assert main(["score", str(path), "--openai-url", server.url, "--model", "qwen3-vl-8b", "--out", str(out),
                 "--quiet"]) == 0
    printed = capsys.readouterr()
    stub = server.stub
    v = _verdicts(out)
    # one verdict per trajectory, judged by the server from the pixels it received
    assert sorted(v) == sorted(r["id"] for r in recs) and len(out.read_text().splitlines()) == len(recs)
    assert {i: d["score"] for i, d in v.items()} == {r["id"]: r["label"] for r in recs}
    verify = stub.of_kind("verify")
    assert sorted(tuple(c["images"]) for c in verify) == sorted(tuple(f) for f in frames.values())
    assert not stub.rejected
    # the whole method on the server: one router and one cue call per distinct instruction
    for kind in ("route", "cue"):
        calls = stub.of_kind(kind)
        assert len(calls) == len(INSTRUCTIONS)
        assert sorted(next(i for i in INSTRUCTIONS if i in c["text"]) for c in calls) == sorted(INSTRUCTIONS)
    assert all(CUE.split(": ", 1)[1] in c["text"] for c in verify)  # the cue reached the verifier prompt
    assert all(d["cues"] and d["category"] == "state_navigation" for d in v.values())
    # p_success from the SCORE digit's logprobs; tokens from usage; costs add up to the calls
    assert {i: d["p_success"] for i, d in v.items()} == {r["id"]: pytest.approx(P_PASS if r["label"] else P_FAIL)
                                                          for r in recs}
    assert all(d["prompt_tokens"] == 1300 and d["completion_tokens"] == 7 for d in v.values())
    assert sum(d["cost_calls"] for d in v.values()) == pytest.approx(len(stub.calls)) == 12
    assert sum(d["cost_tokens"] for d in v.values()) == pytest.approx(6 * 1307 + 3 * 307 + 3 * 407)
    # provenance: the URL and the served model; the key went to the server and is written nowhere
    assert {d["model"] for d in v.values()} == {f"qwen3-vl-8b@{server.url}"}
    cfg = json.loads(out.with_suffix(".config.json").read_text())
    assert cfg["engine"]["base_url"] == server.url and cfg["engine"]["model"] == "qwen3-vl-8b"
    assert cfg["engine"]["api_key_env"] == "OPENAI_API_KEY"
    assert {c["auth"] for c in stub.calls} == {f"Bearer {SECRET}"}
    assert {c["model"] for c in stub.calls} == {"qwen3-vl-8b"}
    for f in out.parent.iterdir():
        assert SECRET not in f.read_text(), f
    assert SECRET not in printed.out + printed.err
    assert "chat/completions" in caplog.text and SECRET not in caplog.text


def test_eval_without_logprobs_leaves_p_success_null(data, server, tmp_path, monkeypatch):
    path, _recs, _, _ = data
    server.stub.logprobs = False
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("VERIFIER_KEY", SECRET)
    out = tmp_path / "eval"
    assert main(["eval", str(path), "--openai-url", server.url, "--model", "qwen3-vl-8b", "--out", str(out),
                 "--openai-api-key-env", "VERIFIER_KEY", "--no-review", "--quiet"]) == 0
    v = _verdicts(out / "verdicts.jsonl")
    assert all(d["status"] == "ok" and d["p_success"] is None for d in v.values())
    assert all(c["logprobs"] for c in server.stub.of_kind("verify"))  # asked for, not returned
    assert json.loads((out / "metrics.json").read_text())["overall"]["acc"] == 100.0
    assert {c["auth"] for c in server.stub.calls} == {f"Bearer {SECRET}"}
    for f in out.rglob("*.json*"):
        assert SECRET not in f.read_text(), f


def test_ablate_and_tts_share_routes_and_cues(data, server, tmp_path):
    path, recs, _, _ = data
    assert main(["ablate", str(path), "--openai-url", server.url, "--model", "qwen3-vl-8b",
                 "--out", str(tmp_path / "ab"), "--openai-top-logprobs", "0", "--quiet"]) == 0
    stub = server.stub
    assert len(stub.of_kind("route")) == len(stub.of_kind("cue")) == len(INSTRUCTIONS)  # once for the 4 rows
    assert len(stub.of_kind("verify")) == 4 * len(recs) and not any(c["logprobs"] for c in stub.calls)
    assert main(["tts", str(path), "--openai-url", server.url, "--model", "qwen3-vl-8b",
                 "--out", str(tmp_path / "tts"), "--quiet"]) == 0
    tts = json.loads((tmp_path / "tts" / "tts.json").read_text())
    assert tts["bestofn"]["2"] == 100.0 and tts["random"]["2"] == 50.0  # the verifier picks each task's pass


def test_reward_config_names_the_server_and_finds_its_model(data, server, tmp_path, monkeypatch):
    _path, recs, _, _ = data
    monkeypatch.setenv("MY_VERIFIER_KEY", SECRET)
    cfg = tmp_path / "reward.yaml"
    cfg.write_text(f"openai_url: {server.url}\nopenai_api_key_env: MY_VERIFIER_KEY\nreward: p_success\n"
                   f"data_root: {tmp_path}\n")
    rm = RewardModel.from_config(cfg)
    try:
        rewards = rm.rewards(recs)
        assert rewards == [pytest.approx(P_PASS if r["label"] else P_FAIL) for r in recs]
        assert rm.loads == 1 and rm.load().engine.name == f"qwen3-vl-8b@{server.url}"  # GET /v1/models
        assert {c["auth"] for c in server.stub.calls} == {f"Bearer {SECRET}"}
        assert rm.stats["pipeline"]["calls_by_kind"] == {"route": 3, "cue": 3, "verify": 6}
    finally:
        rm.close()


def test_serve_takes_the_remote_flags(data, server, monkeypatch):
    import adaptrubric_local.rewards.serve as serve_mod

    path, recs, _, _ = data
    got = {}

    def fake_serve(rm, cfg):  # stands in for uvicorn: score through the service's RewardModel
        got["rewards"] = rm.rewards(recs[:2])
        got["name"] = rm.load().engine.name
        rm.close()

    monkeypatch.setattr(serve_mod, "serve", fake_serve)
    assert main(["serve", "--openai-url", server.url, "--model", "qwen3-vl-8b", "--openai-concurrency", "2",
                 "--data-root", str(path.parent)]) == 0
    assert got == {"rewards": [1.0, 0.0], "name": f"qwen3-vl-8b@{server.url}"}


@pytest.mark.parametrize("flags, message", [
    (["--openai-url", "vllm:8000"], "must start with http"),
    (["--openai-url", "http://x/v1", "--votes", "3"], "votes=3 cannot be used with openai_url"),
    (["--openai-url", "http://x/v1", "--ray"], "raise --openai-concurrency"),
    (["--openai-url", "http://x/v1", "--openai-top-logprobs", "30"], "openai_top_logprobs must be in [0, 20]"),
    (["--openai-url", "http://127.0.0.1:9/v1"], "verifier server at http://127.0.0.1:9/v1 did not answer GET"),
])
def test_bad_remote_settings_fail_before_any_call(data, tmp_path, capsys, flags, message):
    path = data[0]
    assert main(["score", str(path), "--model", "m", "--out", str(tmp_path / "v.jsonl"), "--quiet", *flags]) == 2
    assert message in capsys.readouterr().err


def test_config_validation():
    assert RemoteConfig().openai_url is None
    with pytest.raises(ValueError, match="adapter"):
        check_remote({"openai_url": "http://x/v1", "adapter": "/some/lora"})
    with pytest.raises(ValueError, match="one of service_url"):
        RewardModel(openai_url="http://x/v1", service_url="http://svc:8000")
    with pytest.raises(ValueError, match="openai_api_key_env"):
        RemoteConfig(openai_url="http://x/v1", openai_api_key_env="")


def test_prompt_shows_what_score_sends_to_the_server(data, server, capsys):
    path = data[0]
    assert main(["prompt", str(path), "--id", "t01", "--openai-url", server.url, "--model", "qwen3-vl-8b",
                 "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["category"] == "state_navigation" and shown["cues"] == [CUE.split(": ", 1)[1]]
    assert [c["kind"] for c in server.stub.calls] == ["route", "cue"]  # no verifier call


def test_a_reply_shortened_by_the_server_context_is_not_a_cap_hit(monkeypatch):
    """finish_reason 'length' with fewer tokens than the cap: the server's context cut it (vLLM shortens a reply to
    what --max-model-len leaves), reported as hit_context; the whole cap used is hit_cap; a prompt the server
    refuses as too long is an error naming the fix. (The same against the real vLLM: test_engine_vllm_engine.py.)"""
    from types import SimpleNamespace as NS

    from adaptrubric_local.engine.base import Request
    from adaptrubric_local.engine.endpoint import Endpoint
    from adaptrubric_local.engine.openai_engine import OpenAIEngine, OpenAIEngineConfig

    def reply(n):
        return NS(choices=[NS(message=NS(content="SCORE: 1\nEVID", reasoning_content=None), finish_reason="length",
                              logprobs=None)], usage=NS(prompt_tokens=2000, completion_tokens=n))

    replies = iter([reply(40), reply(100), ValueError("This model's maximum context length is 2048 tokens. However, "
                                                      "you requested 2311 tokens in the messages")])

    def create(**kw):
        r = next(replies)
        if isinstance(r, Exception):
            raise r
        return r

    endpoint = Endpoint("http://127.0.0.1:9/v1", "m", max_retries=0, concurrency=1)
    eng = OpenAIEngine(OpenAIEngineConfig(endpoint=endpoint, max_new_tokens=100))
    monkeypatch.setattr(eng.client.chat.completions, "create", create)
    try:
        short, capped, refused = eng.generate([Request(prompt="x"), Request(prompt="y"), Request(prompt="z")])
    finally:
        eng.close()
    assert short.hit_context and not short.hit_cap and short.completion_tokens == 40
    assert capped.hit_cap and not capped.hit_context
    assert refused.error and "--max-model-len" in refused.error and "2311" in refused.error


def test_score_on_the_server_pipes_its_summary_and_is_quiet_with_quiet(data, server, tmp_path):
    """As a user runs it (its own process): stdout is the summary JSON and nothing else, and with --quiet
    its one result line, stderr empty."""
    path = data[0]
    cmd = [sys.executable, "-m", "adaptrubric_local.cli", "score", str(path), "--openai-url", server.url, "--model",
           "qwen3-vl-8b"]
    out = tmp_path / "v.jsonl"
    r = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout) == json.loads(out.with_suffix(".summary.json").read_text())
    out = tmp_path / "q.jsonl"
    r = subprocess.run([*cmd, "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == [r.stdout.strip()] and r.stdout.startswith(f"{out}: 6 verdict(s)"), r.stdout
    assert r.stderr == ""
