"""Distilling from a thinking judge behind an OpenAI-compatible server (a stub on loopback, answering
as vLLM does with and without a reasoning parser): reasoning kept in its own field, inline <think>
blocks out of the targets, replies cut by the token cap counted as truncated and not retried at the
same cap, the SCORE digit's logprobs as the teacher's P(SCORE=1), the API key from the environment
and in no file."""
import json
import re
from collections import Counter

import pytest
from openai_stub import Running, _logprobs

from adaptrubric_local.cli.distill import add_subcommands
from adaptrubric_local.distill.examples import examples, read_split

from conftest import canonical_record, write_jsonl

CASES = ("reasoning", "inline", "length", "nolp")
THOUGHT = "hidden chain of thought about the screens"


class Judge:
    """A thinking judge: the behaviour per trajectory is chosen by a marker in its instruction."""

    served = "judge"

    def __init__(self):
        self.rejected: list[str] = []
        self.calls: Counter = Counter()
        self.auth: list[str] = []
        self.max_tokens: list[int] = []

    def reply(self, body: dict, auth: str) -> dict:
        self.auth.append(auth)
        content = body["messages"][0]["content"]
        text = " ".join(p.get("text", "") for p in content if p["type"] == "text")
        case = re.search(r"case (\w+)", text).group(1)
        label = int(re.search(r"label (\d)", text).group(1))
        if "SCORE: [0/1]" not in text:  # router and cue calls
            answer = "NO_HINT: the rubric covers it." if "NO_HINT" in text else "CATEGORY: state_navigation"
            return _chat(answer)
        self.calls[case] += 1
        self.max_tokens.append(body["max_tokens"])
        verdict = f"The final screen shows it.\nSCORE: {label}\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"
        if case == "length" and body["max_tokens"] < 4000:
            # the cap cut it: a server then reports every token it was allowed as generated
            return _chat(None, reasoning="I need to check every screen " * 50, finish="length",
                         completion=body["max_tokens"])
        if case == "inline":
            return _chat(f"<think>{THOUGHT}</think>\n\n{verdict}")
        lp = _logprobs(verdict, 0.8 if label else 0.2) if case != "nolp" and body.get("logprobs") else None
        return _chat(verdict, reasoning=THOUGHT if case == "reasoning" else None, logprobs=lp)


def _chat(text, reasoning=None, finish="stop", logprobs=None, completion=5) -> dict:
    msg = {"role": "assistant", "content": text}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "judge",
            "choices": [{"index": 0, "finish_reason": finish, "message": msg, "logprobs": logprobs}],
            "usage": {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}}


@pytest.fixture
def judge():
    j = Judge()
    running = Running(j)
    j.url = running.url
    yield j
    running.close()


@pytest.fixture
def data(tmp_path):
    recs = [canonical_record(tmp_path, f"{case}{i}", 3, instruction=f"Turn on Wi-Fi (case {case}, label {i}).",
                             label=i, task_id=f"{case}{i}") for case in CASES for i in (0, 1)]
    return write_jsonl(tmp_path / "trajs.jsonl", recs)


def _collect(judge, data, out, *extra):
    import argparse

    ap = argparse.ArgumentParser()
    add_subcommands(ap.add_subparsers())
    args = ap.parse_args(["distill", "collect", str(data), "--out", str(out), "--teacher-url", judge.url,
                          "--teacher-name", "judge", "--max-retries", "0", "--quiet", "--val-fraction", "0.25",
                          *extra])
    return args.func(args)


def _records(out) -> dict:
    return {r["id"]: r for r in map(json.loads, (out / "collected.jsonl").read_text().splitlines())}


def test_reasoning_inline_think_length_and_logprobs_land_in_their_fields(judge, data, tmp_path, capsys,
                                                                         monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-123")
    out = tmp_path / "d"
    assert _collect(judge, data, out, "--teacher-max-new-tokens", "1024") == 0
    recs = _records(out)
    assert set(recs) == {"reasoning0", "reasoning1", "inline0", "inline1", "nolp0", "nolp1"}
    r = recs["reasoning1"]["verify"]
    assert r["reasoning"] == THOUGHT and r["response"].startswith("The final screen")
    assert r["p_success"] == pytest.approx(0.8) and recs["reasoning0"]["verify"]["p_success"] == pytest.approx(0.2)
    i = recs["inline1"]["verify"]
    assert i["reasoning"] == THOUGHT and i["response"].startswith("<think>")  # the reply is kept verbatim
    assert i["verdict"]["score"] == 1 and i["p_success"] is None
    assert recs["nolp1"]["verify"]["p_success"] is None and recs["nolp1"]["verify"]["reasoning"] is None
    rejected = [json.loads(x) for x in (out / "rejected.jsonl").read_text().splitlines()]
    assert {x["id"] for x in rejected} == {"length0", "length1"}
    assert all(x["reason"] == "truncated" and x["max_new_tokens"] == 1024 for x in rejected)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["truncated"] == 2 and manifest["counts"]["unparsed"] == 0
    assert manifest["counts"]["with_p_success"] == 2 and manifest["counts"]["with_reasoning"] == 4
    assert "--teacher-max-new-tokens" in capsys.readouterr().err
    # the key went to the server from the environment, and is written nowhere
    assert set(judge.auth) == {"Bearer sk-test-secret-123"}
    for f in out.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".jsonl"):
            assert "sk-test-secret" not in f.read_text(), f


def test_truncated_replies_are_retried_only_with_a_larger_cap(judge, data, tmp_path):
    out = tmp_path / "d"
    _collect(judge, data, out, "--teacher-max-new-tokens", "1024")
    assert judge.calls["length"] == 2
    _collect(judge, data, out, "--teacher-max-new-tokens", "1024", "--resume")
    assert judge.calls["length"] == 2  # the same cap would cut them again: not asked
    _collect(judge, data, out, "--teacher-max-new-tokens", "8192", "--resume")
    assert judge.calls["length"] == 4 and {"length0", "length1"} <= set(_records(out))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["truncated"] == 0 and manifest["counts"]["collected"] == 8


def test_api_key_env_names_the_variable(judge, data, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("JUDGE_KEY", "sk-other")
    _collect(judge, data, tmp_path / "d", "--api-key-env", "JUDGE_KEY")
    assert set(judge.auth) == {"Bearer sk-other"}
    judge.auth.clear()
    _collect(judge, data, tmp_path / "e")
    assert set(judge.auth) == {"Bearer EMPTY"}  # unset: what vLLM and SGLang accept


def test_no_training_target_holds_thinking(judge, data, tmp_path):
    out = tmp_path / "d"
    _collect(judge, data, out, "--teacher-max-new-tokens", "8192")
    recs = read_split(out, "train") + read_split(out, "val")
    for target in ("full", "verdict"):
        exs = examples(recs, out, target=target, tasks=("verify", "route", "cue"))
        assert len([e for e in exs if e.kind == "verify"]) == 8
        assert not [e.id for e in exs if "<think>" in e.target or "</think>" in e.target or THOUGHT in e.target]
        assert all(e.target == e.target.lstrip() for e in exs)
    inline = next(e for e in examples(recs, out, target="full") if e.id == "inline1")
    assert inline.target.startswith("The final screen shows it.\nSCORE: 1")


def test_an_in_process_thinking_teacher_is_kept_whole(qwen3_thinking_engine, tmp_path, monkeypatch):
    """`--teacher-model Qwen3-VL-*-Thinking` in process (the tiny model on the real Qwen3 tokenizer with a
    Thinking chat template, scripted): the verdict is the answer's after </think>, the reasoning is its
    own field and in no target; a reply cut inside its reasoning is truncated, not a verdict or a target."""
    from dataclasses import replace

    from forced_generation import ANSWER, DRAFT, force

    from adaptrubric_local.distill.collect import CollectConfig, collect, teacher_pipeline

    recs = [canonical_record(tmp_path, f"t{i}", 3, instruction=f"Turn on Wi-Fi ({i}).", label=0, task_id=f"t{i}")
            for i in range(2)]
    data = write_jsonl(tmp_path / "trajs.jsonl", recs)
    force(monkeypatch, qwen3_thinking_engine, [DRAFT + "</think>\n\n" + ANSWER + "Let me know."])
    monkeypatch.setattr(qwen3_thinking_engine.config, "max_new_tokens", 400)
    pipe = replace(teacher_pipeline("model", router="rules", verify_max_new_tokens=400), fine=False)
    collect(data, tmp_path / "d", qwen3_thinking_engine, pipe, CollectConfig(val_fraction=0.5), progress=False)
    out = tmp_path / "d"
    recs = read_split(out, "train") + read_split(out, "val")
    assert len(recs) == 2
    for r in recs:
        v = r["verify"]
        assert v["verdict"]["score"] == 0 and v["reasoning"] == DRAFT.strip() and not v["hit_cap"]
        assert v["response"] == DRAFT + "</think>\n\n" + ANSWER  # verbatim, stopped after the answer's block
    for target in ("full", "verdict"):
        for e in examples(recs, out, target=target):
            assert "</think>" not in e.target and "draft" not in e.target and "SCORE: 0" in e.target
    # the same teacher with a cap that cuts it inside its reasoning, after the draft's verdict lines
    cap = len(qwen3_thinking_engine.tokenizer.encode(DRAFT, add_special_tokens=False)) - 3
    collect(data, tmp_path / "e", qwen3_thinking_engine, replace(pipe, verify_max_new_tokens=cap),
            CollectConfig(val_fraction=0.5), progress=False)
    manifest = json.loads((tmp_path / "e" / "manifest.json").read_text())
    assert manifest["counts"]["collected"] == 0 and manifest["counts"]["truncated"] == 2
