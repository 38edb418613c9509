"""Bank induction and refinement with the teacher behind a stub OpenAI-compatible server on 127.0.0.1
(the scripted teacher answers what arrives over HTTP; screenshots arrive as data URLs)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from adaptrubric_local.bank import load_bank
from adaptrubric_local.bank_induction import InduceConfig, RefineConfig, induce, refine
from adaptrubric_local.bank_induction.synthetic import ScriptedTeacher, make_domain, scripted_verifier
from adaptrubric_local.engine.base import Request
from adaptrubric_local.engine.teacher import TeacherConfig
from adaptrubric_local.formats import load_trajectories


class Server:
    """A chat-completions endpoint; `down_for` is a prompt marker answered with HTTP 500."""

    def __init__(self):
        self.teacher = ScriptedTeacher()
        self.bodies: list[dict] = []
        self.down_for = None

    def reply(self, body: dict) -> tuple[int, dict]:
        self.bodies.append(body)
        parts = body["messages"][0]["content"]
        texts = [p["text"] for p in parts if p["type"] == "text"]
        images = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
        req = Request(prompt=texts[0], images=images, suffix=texts[1] if len(texts) > 1 else "")
        if self.down_for and self.down_for in req.prompt:
            return 500, {"error": {"message": "teacher overloaded", "type": "server_error"}}
        text = self.teacher(req)
        return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": len(text.split()), "total_tokens": 0}}


@pytest.fixture
def server():
    stub = Server()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self._send(200, {"object": "list", "data": [{"id": "judge-xl", "object": "model", "owned_by": "t"}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._send(*stub.reply(body))

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    stub.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    yield stub
    srv.shutdown()
    srv.server_close()


def test_induce_then_refine_through_an_openai_compatible_teacher(server, tmp_path):
    path = make_domain(tmp_path / "data", tasks_per_kind=6)
    trajs = load_trajectories(path).trajectories
    teacher = TeacherConfig(teacher_url=server.url, teacher_name="judge-xl", max_retries=0, timeout=10,
                            concurrency=4).build()
    try:
        summary = induce(trajs, tmp_path / "bank.yaml", teacher, InduceConfig(images_per_traj=2), data_desc=str(path))
        bank = load_bank(tmp_path / "bank.yaml")
        assert "crm_refund" in bank.families and bank.record[0].teacher == f"judge-xl@{server.url}"
        first = server.bodies[0]
        assert first["model"] == "judge-xl"
        urls = [p["image_url"]["url"] for p in first["messages"][0]["content"] if p["type"] == "image_url"]
        assert len(urls) == 2 * 8 and all(u.startswith("data:image/png;base64,") for u in urls)
        assert summary["teacher_calls"] == len(server.bodies) == 36 // 8 + 1 + 1

        server.down_for = "FAMILY: crm_refund"  # one family's revision call fails with HTTP 500
        rep = refine(trajs, tmp_path / "bank.yaml", tmp_path / "refine", scripted_verifier(), teacher,
                     RefineConfig(rounds=1))
    finally:
        teacher.close()
    changes = next(r for r in rep["rounds"] if r["round"] == 1)["changes"]
    assert changes["crm_refund"]["decision"] == "teacher error" and "500" in changes["crm_refund"]["error"]
    assert changes["crm_update"]["decision"] == "kept"
    assert load_bank(tmp_path / "refine" / "round_1.yaml").families["crm_update"].verification_steps[-1] == \
        "Check that the trajectory shows a click on Save."
    log = [json.loads(x) for x in (tmp_path / "refine" / "teacher.jsonl").read_text().splitlines()]
    assert {x["tag"] for x in log} == {"round1:crm_update", "round1:crm_refund"}
    assert any(x["error"] for x in log if x["tag"] == "round1:crm_refund")


def test_cli_induce_and_refine_with_a_served_teacher(server, tmp_path, tiny_model, monkeypatch, capsys):
    from adaptrubric_local import cli
    from adaptrubric_local.cli import bank as cli_bank

    build = cli.build_parser

    def build_with_bank():  # cli.py registers cli_bank once it is in its list of optional command groups
        ap = build()
        sub = ap._subparsers._group_actions[0]
        if "bank" not in sub.choices:
            cli_bank.add_subcommands(sub)
        return ap

    monkeypatch.setattr(cli, "build_parser", build_with_bank)
    run = cli.main
    data = make_domain(tmp_path / "data", tasks_per_kind=2)
    teacher = ["--teacher-url", server.url, "--teacher-name", "judge-xl", "--max-retries", "0"]
    assert run(["bank", "induce", str(data), "--out", str(tmp_path / "b.yaml"), "--domain", "ShopDesk", *teacher]) == 0
    assert "crm_update" in load_bank(tmp_path / "b.yaml").families
    assert "teacher calls" in capsys.readouterr().err
    rc = run(["bank", "refine", str(data), "--bank-path", str(tmp_path / "b.yaml"), "--out",
              str(tmp_path / "r"), "--model", str(tiny_model), "--rounds", "1", "--verify-max-new-tokens", "8",
              *teacher])
    assert rc == 0 and "| round | refine acc |" in capsys.readouterr().out
    assert (tmp_path / "r" / "round_1.yaml").exists() and (tmp_path / "r" / "report.json").exists()
