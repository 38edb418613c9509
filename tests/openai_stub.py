"""A scripted OpenAI-compatible chat server on loopback, standing in for a vLLM/SGLang server running
the verifier (tests/test_engine_remote.py, test_rewards.py, test_rewards_verl.py).

It answers the router prompt with a CATEGORY line and the cue prompt with one cue, and judges a
verifier request by the pixels it was sent: every image_url must be a base64 data URL that decodes
to an image, and the verdict is the SCORE of the trajectory whose final screenshot has those pixels
(`scores`: pixel hash -> 0/1); screenshots it does not know get a reply with no verdict block. With
`logprobs` on, a request that asks for them gets the SCORE digit's top_logprobs (P("1") = 0.9 for a
pass, 0.2 for a fail). Every call is recorded (kind, model, Authorization header, the pixel hashes of
its images, its text), and GET /v1/models lists the served name."""
from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from PIL import Image

P_PASS, P_FAIL = 0.9, 0.2
CUE = "CUE_1: Check if the final screenshot shows the requested setting switched on."


def pixel_hash(img: Image.Image) -> str:
    """What identifies a screenshot: its decoded RGB pixels and size, not its file bytes."""
    rgb = img.convert("RGB")
    return hashlib.sha256(repr(rgb.size).encode() + rgb.tobytes()).hexdigest()[:16]


def file_pixels(path: str | Path) -> str:
    with Image.open(path) as img:
        return pixel_hash(img)


def _decode(url: str) -> str:
    m = re.match(r"data:image/[\w.+-]+;base64,(.*)$", url, re.S)
    assert m, f"not a base64 image data URL: {url[:60]!r}"
    with Image.open(io.BytesIO(base64.b64decode(m.group(1), validate=True))) as img:
        img.load()
        return pixel_hash(img)


def _logprobs(text: str, p1: float) -> dict:
    """vLLM-style logprobs of `text`, token by token; the SCORE digit carries P("1") = p1."""
    at = text.rfind("SCORE: ") + len("SCORE: ")
    out, pos = [], 0
    for tok in re.findall(r"\s+|\d|[^\s\d]+", text):
        top = [{"token": tok, "logprob": 0.0, "bytes": None}]
        if pos == at:
            top = [{"token": "1", "logprob": math.log(p1), "bytes": None},
                   {"token": "0", "logprob": math.log(1 - p1), "bytes": None}]
        lp = next(t["logprob"] for t in top if t["token"] == tok)
        out.append({"token": tok, "logprob": lp, "bytes": None, "top_logprobs": top})
        pos += len(tok)
    return {"content": out}


class Stub:
    """The server's script and its record of calls."""

    def __init__(self, scores: dict[str, int], served: str = "verifier", logprobs: bool = True):
        self.scores, self.served, self.logprobs = scores, served, logprobs
        self.calls: list[dict] = []
        self.rejected: list[str] = []  # why malformed requests were answered 400
        self.lock = threading.Lock()

    def reply(self, body: dict, auth: str) -> dict:
        parts = body["messages"][0]["content"]
        text = "\n".join(p["text"] for p in parts if p["type"] == "text")
        images = [_decode(p["image_url"]["url"]) for p in parts if p["type"] == "image_url"]
        kind = "verify" if images else ("cue" if "NO_HINT" in text else "route")
        with self.lock:
            self.calls.append({"kind": kind, "model": body.get("model"), "auth": auth, "images": images,
                               "text": text, "logprobs": bool(body.get("logprobs"))})
        if kind == "route":
            return _chat("CATEGORY: state_navigation", 300)
        if kind == "cue":
            return _chat(CUE, 400)
        score = self.scores.get(images[-1])
        if score is None:
            return _chat("I do not recognise these screenshots.", 1000 + 100 * len(images))
        verdict = (f"The final screen shows the outcome.\nSCORE: {score}\nEVIDENCE_SUFFICIENT: yes\n"
                   "MISSING_EVIDENCE: none")
        lp = _logprobs(verdict, P_PASS if score else P_FAIL) if self.logprobs and body.get("logprobs") else None
        return _chat(verdict, 1000 + 100 * len(images), lp)

    def of_kind(self, kind: str) -> list[dict]:
        return [c for c in self.calls if c["kind"] == kind]

    @staticmethod
    def scores_of(trajs) -> list[str]:
        """The pixel hashes of canonical records' final frames (what a verifier call for each ends with)."""
        return [file_pixels(t["steps"][-1]["screenshot"]) for t in trajs]


def _chat(text: str, prompt_tokens: int, logprobs=None) -> dict:
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "verifier",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": logprobs,
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 7, "total_tokens": prompt_tokens + 7}}


class Running:
    """A Stub served on 127.0.0.1 (`address`: host:port, `url`: its /v1 base URL)."""

    def __init__(self, stub: Stub):
        self.stub = stub

        class Handler(BaseHTTPRequestHandler):
            def _send(self, code: int, obj: dict) -> None:
                payload = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    return self._send(200, {"object": "list", "data": [
                        {"id": stub.served, "object": "model", "created": 0, "owned_by": "stub"}]})
                return self._send(404, {"error": "not found"})

            def do_POST(self):
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": f"no route {self.path}"})
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                try:
                    self._send(200, stub.reply(body, self.headers.get("Authorization", "")))
                except (AssertionError, ValueError, KeyError, OSError) as exc:  # malformed: 400, and recorded
                    stub.rejected.append(f"{type(exc).__name__}: {exc}")
                    self._send(400, {"error": {"message": str(exc)}})

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.url = f"http://{self.address}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def scores_by_final_frame(trajs: list[dict]) -> dict[str, int]:
    """The stub's scores for canonical records: each one's label, keyed by its final frame's pixels."""
    scores: dict[str, int] = {}
    for t in trajs:
        key = file_pixels(t["steps"][-1]["screenshot"])
        assert scores.setdefault(key, t["label"]) == t["label"], f"{t['id']}: a final frame shared across labels"
    return scores


def forbid_local_models(monkeypatch) -> None:
    """Make building the in-process verifier, or any transformers model, fail the test."""
    import transformers

    import adaptrubric_local.engine.build as build

    def refuse(*a, **k):
        raise AssertionError("a model was loaded in this process")

    monkeypatch.setattr(build, "build_engine", refuse)
    monkeypatch.setattr(transformers.PreTrainedModel, "from_pretrained", classmethod(refuse))
