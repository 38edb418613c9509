"""Collecting a teacher's judgments: an OpenAI-compatible stub server on loopback (with timeouts,
error statuses, malformed and unparseable replies), labels and replayed verdicts as teachers,
the task split, --resume."""
import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import canonical_record, write_jsonl

from adaptrubric_local.distill.collect import CollectConfig, collect, label_teacher, teacher_pipeline
from adaptrubric_local.engine.endpoint import Endpoint
from adaptrubric_local.engine.openai_engine import OpenAIEngine, OpenAIEngineConfig
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.prompts import load_prompts

MODES = {"t0": "ok", "t1": "ok", "t2": "timeout", "t3": "error", "t4": "malformed", "t5": "flaky", "t6": "unparsed",
         "t7": "ok", "t8": "route_error", "t9": "ok"}


class Stub:
    """A scripted chat-completions server: behaviour per trajectory, chosen by a marker in the text."""

    def __init__(self):
        self.calls: Counter = Counter()
        self.healthy = False
        self.images_seen: list[str] = []

    def reply(self, body: dict) -> tuple[int, bytes, float]:
        content = body["messages"][0]["content"]
        text = " ".join(p.get("text", "") for p in content if p["type"] == "text")
        urls = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
        self.images_seen += urls
        case = re.search(r"case (t\d+)", text).group(1)
        label = int(re.search(r"label (\d)", text).group(1))
        kind = "verify" if "SCORE: [0/1]" in text else "cue" if "NO_HINT" in text else "route"
        self.calls[(case, kind)] += 1
        mode = "ok" if self.healthy and MODES[case] != "unparsed" else MODES[case]
        if kind == "route":
            if mode == "route_error":
                return 500, b'{"error": {"message": "router overloaded"}}', 0
            return 200, _chat("CATEGORY: state_navigation"), 0
        if kind == "cue":
            return 200, _chat("NO_HINT: the coarse rubric covers the task."), 0
        if mode == "timeout":
            return 200, _chat("too late"), 1.5
        if mode == "error":
            return 500, b'{"error": {"message": "internal error"}}', 0
        if mode == "malformed":
            return 200, b'{"id": "x", "object": "chat.completion", "choices": []}', 0
        if mode == "flaky" and self.calls[(case, kind)] == 1:
            return 503, b'{"error": {"message": "busy"}}', 0
        if mode == "unparsed":
            return 200, _chat("I think the agent did fine."), 0
        return 200, _chat(f"The final screen shows it.\nSCORE: {label}\nEVIDENCE_SUFFICIENT: yes\n"
                          "MISSING_EVIDENCE: none"), 0


def _chat(text: str) -> bytes:
    return json.dumps({"id": "c1", "object": "chat.completion", "created": 0, "model": "judge",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()


@pytest.fixture
def stub_server():
    stub = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, payload, delay = stub.reply(body)
            time.sleep(delay)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and hung up

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield stub, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture
def data(tmp_path):
    recs = [canonical_record(tmp_path, case, 3, instruction=f"Turn on Wi-Fi (case {case}, label {i % 2}).",
                             label=i % 2, task_id=f"task{i // 2}", platform="android")
            for i, case in enumerate(MODES)]
    return write_jsonl(tmp_path / "trajs.jsonl", recs)


def _teacher(url):
    return OpenAIEngine(OpenAIEngineConfig(endpoint=Endpoint(url, "judge", timeout=0.5, max_retries=1, concurrency=4)))


def _ids(path: Path) -> list[str]:
    return [json.loads(x)["id"] for x in path.read_text().splitlines() if x.strip()]


def test_collect_against_stub_server_with_failures_then_resume(stub_server, data, tmp_path):
    stub, url = stub_server
    out = tmp_path / "dist"
    pcfg = teacher_pipeline("url")
    man = collect(data, out, _teacher(url), pcfg, CollectConfig(val_fraction=0.2), teacher_desc={"name": "judge"},
                  progress=False)
    run = man["this_run"]
    # timeout, 500, malformed and a failed router call are failures; the flaky 503 was retried and succeeded
    assert run["failed"] == 4 and run["unparsed"] == 1 and run["collected"] == 5
    failures = {json.loads(x)["id"]: json.loads(x)["error"] for x in (out / "failures.jsonl").read_text().splitlines()}
    assert set(failures) == {"t2", "t3", "t4", "t8"}
    assert "Timeout" in failures["t2"] and "500" in failures["t3"] and "malformed" in failures["t4"]
    assert "router call failed" in failures["t8"]
    assert stub.calls[("t3", "verify")] == 2 and stub.calls[("t5", "verify")] == 2  # 1 + max_retries
    assert all(u.startswith("data:image/png;base64,") for u in stub.images_seen)
    assert sorted(_ids(out / "rejected.jsonl")) == ["t6"]  # unparsed: counted, left out, never a label
    first = set(_ids(out / "collected.jsonl"))
    assert first == {"t0", "t1", "t5", "t7", "t9"}
    rec = json.loads((out / "collected.jsonl").read_text().splitlines()[0])
    assert rec["route"]["response"] == "CATEGORY: state_navigation" and rec["route"]["prompt"]
    assert rec["cue"]["response"].startswith("NO_HINT") and rec["verify"]["response"].endswith("MISSING_EVIDENCE: none")
    assert all((out / p).is_file() for p in rec["verify"]["images"])
    assert rec["verify"]["messages"][0]["content"][1]["image_url"]["url"] == rec["verify"]["images"][0]

    with pytest.raises(ValueError, match="--resume"):
        collect(data, out, _teacher(url), pcfg, progress=False)
    stub.healthy = True
    before = dict(stub.calls)
    man = collect(data, out, _teacher(url), pcfg, CollectConfig(val_fraction=0.2), resume=True,
                  teacher_desc={"name": "judge"}, progress=False)
    assert man["this_run"] == {"collected": 4, "unparsed": 0, "truncated": 0, "disagree": 0, "failed": 0,
                               "resumed_past": 6, "bad_records": 0}
    assert stub.calls[("t0", "verify")] == before[("t0", "verify")]  # nothing collected is asked again
    collected = _ids(out / "collected.jsonl")
    assert sorted(collected) == sorted(first | {"t2", "t3", "t4", "t8"}) and len(collected) == 9
    c = man["counts"]
    assert c["train"] + c["val"] == 9 and c["unparsed"] == 1 and c["failed"] == 0
    train_tasks = {json.loads(x)["task_id"] for x in (out / "train.jsonl").read_text().splitlines()}
    val_tasks = {json.loads(x)["task_id"] for x in (out / "val.jsonl").read_text().splitlines()}
    assert val_tasks and not train_tasks & val_tasks  # split by task
    assert man["bank_sha"] and man["teacher"] == {"name": "judge"}
    assert man["prompts_sha"] == load_prompts().sha  # the one prompts_sha, as verdict files record it

    from adaptrubric_local.distill.examples import examples, read_split

    recs = read_split(out, "train") + read_split(out, "val")
    exs = examples(recs, out, target="verdict", tasks=("verify", "route", "cue"))
    kinds = Counter(e.kind for e in exs)
    assert kinds == {"verify": 9, "route": 9, "cue": 9}  # one router and one cue call per instruction
    v = next(e for e in exs if e.kind == "verify")
    assert v.target.startswith("SCORE: ") and "final screen" not in v.target and all(Path(p).is_file() for p in v.images)
    assert next(e for e in exs if e.kind == "route").target == "CATEGORY: state_navigation"


def test_labels_teacher_agree_and_balance(tmp_path):
    recs = [canonical_record(tmp_path, f"x{i}", 3, instruction=f"Open the app number {i}.", label=int(i < 3),
                             task_id=f"task{i}") for i in range(10)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    trajs = load_trajectories(data).trajectories
    man = collect(data, tmp_path / "d", label_teacher(trajs), teacher_pipeline("labels"),
                  CollectConfig(val_fraction=0.2, balance=True), progress=False)
    c = man["counts"]
    assert c["collected"] == 10 and c["val"] == 2
    assert c["train_positive"] * 2 == c["train"]  # balanced
    for line in (tmp_path / "d" / "train.jsonl").read_text().splitlines():
        r = json.loads(line)
        assert r["verify"]["verdict"]["score"] == r["label"]
        assert r["verify"]["response"] == f"SCORE: {r['label']}\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"


def test_replayed_verdicts_disagreeing_are_left_out(tmp_path):
    from adaptrubric_local.cli.distill import add_subcommands
    import argparse

    recs = [canonical_record(tmp_path, f"v{i}", 3, instruction="Turn on Bluetooth.", label=i % 2, task_id=f"k{i}")
            for i in range(4)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    lines = [{"id": "v0", "status": "ok", "score": 0, "category": "state_navigation", "model": "big",
              "raw": "ok\nSCORE: 0\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"},
             {"id": "v1", "status": "ok", "score": 0, "category": "state_navigation", "model": "big",
              "raw": "SCORE: 0\nEVIDENCE_SUFFICIENT: no\nMISSING_EVIDENCE: final_state_ambiguous"},
             {"id": "v2", "status": "unparsed", "model": "big", "raw": "no idea"}]
    vfile = write_jsonl(tmp_path / "v.jsonl", lines)
    ap = argparse.ArgumentParser()
    add_subcommands(ap.add_subparsers())
    args = ap.parse_args(["distill", "collect", str(data), "--out", str(tmp_path / "o"), "--teacher-verdicts",
                          str(vfile), "--agree-with-labels", "--quiet"])
    assert args.func(args) == 1  # v3 has no teacher verdict: reported as a failure
    man = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert man["counts"]["collected"] == 1 and man["counts"]["disagree"] == 1 and man["counts"]["unparsed"] == 1
    assert man["teacher"]["name"] == "big"
    rec = json.loads((tmp_path / "o" / "collected.jsonl").read_text())
    assert rec["id"] == "v0" and rec["route"]["category"] == "state_navigation" and rec["route"]["mode"] == "fixed"


def test_cli_needs_exactly_one_teacher(data, tmp_path):
    import argparse

    from adaptrubric_local.cli.distill import add_subcommands

    ap = argparse.ArgumentParser()
    add_subcommands(ap.add_subparsers())
    for teachers in ([], ["--teacher-labels", "--teacher-model", "m"]):
        args = ap.parse_args(["distill", "collect", str(data), "--out", str(tmp_path / "x"), *teachers])
        with pytest.raises(ValueError, match="exactly one teacher"):
            args.func(args)
    args = ap.parse_args(["distill", "collect", str(data), "--out", str(tmp_path / "x"), "--teacher-url",
                          "http://127.0.0.1:9/v1"])
    with pytest.raises(ValueError, match="--teacher-name"):
        args.func(args)
    with pytest.raises(ValueError, match="url must start with http"):
        Endpoint("127.0.0.1:8000", "m")
    with pytest.raises(ValueError, match="name"):
        OpenAIEngineConfig(endpoint=Endpoint("http://127.0.0.1:8000/v1"))


def test_cli_an_unreachable_teacher_stops_before_the_first_record_naming_the_url(data, tmp_path, capsys):
    from adaptrubric_local.cli import run

    out = tmp_path / "x"
    assert run(["distill", "collect", str(data), "--out", str(out), "--teacher-url", "http://127.0.0.1:9/v1",
                "--teacher-name", "judge", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "teacher at http://127.0.0.1:9/v1 did not answer" in err[0], err
    assert not (out / "failures.jsonl").exists()  # no record was tried


def test_collect_warns_when_a_split_holds_one_class(tmp_path, capsys):
    from adaptrubric_local.cli import main

    def collect_cli(recs, name):
        data = write_jsonl(tmp_path / name / "d.jsonl", recs)
        assert main(["distill", "collect", str(data), "--out", str(tmp_path / name / "out"), "--teacher-labels",
                     "--val-fraction", "0.25", "--quiet"]) == 0
        return capsys.readouterr().err, json.loads((tmp_path / name / "out" / "manifest.json").read_text())

    # one trajectory per task: the held-out task's one example is one class
    one = [canonical_record(tmp_path / "one", f"o{i}", 2, instruction=f"Task {i}.", task_id=f"T{i}", label=i % 2)
           for i in range(4)]
    err, man = collect_cli(one, "one")
    assert man["counts"]["val"] == 1 and len(man["warnings"]) == 1
    cls = "successes (SCORE 1)" if man["counts"]["val_positive"] else "failures (SCORE 0)"
    assert f"WARNING: all 1 validation example(s) are {cls}" in err and "--val-fraction 0.25" in err
    # a success and a failure in every task: both classes on each side, nothing to say
    mixed = [canonical_record(tmp_path / "mixed", f"m{i}", 2, instruction=f"Task {i // 2}.", task_id=f"T{i // 2}",
                              label=i % 2) for i in range(8)]
    err, man = collect_cli(mixed, "mixed")
    assert man["warnings"] == [] and "WARNING" not in err
