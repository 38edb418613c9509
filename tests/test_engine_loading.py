"""Loading a checkpoint (engine/hf.py: `load_model`, `_from_pretrained`) when the hub cannot be reached:
a hub id that is not in the local cache fails in seconds with the message that says how to run offline,
instead of minutes of the hub client's retries; a hub that answers is still used. The network is made
unreachable for the process with HF_ENDPOINT on a closed loopback port (no test reads the network).
Loading from a folder and from the cache is tested in test_engine_hf.py."""
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from adaptrubric_local.engine import hf

from conftest import canonical_record, write_jsonl


def _env(tmp_path, endpoint):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT=endpoint, PYTHONPATH=os.pathsep.join(sys.path))
    return env


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def test_uncached_hub_id_without_network_fails_in_seconds_with_the_offline_help(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", [canonical_record(tmp_path, "t1", 2)])
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "adaptrubric_local.cli", "score", str(data), "--model",
                          "some-org/uncached-vl", "--router", "rules", "--no-fine", "--out", str(tmp_path / "v.jsonl")],
                         capture_output=True, text=True, env=_env(tmp_path, endpoint), timeout=300)
    elapsed = time.monotonic() - t0
    assert elapsed < 15, f"took {elapsed:.1f} s"
    assert run.returncode == 2, run.stderr[-2000:]
    err = run.stderr.strip().splitlines()[-1]
    assert err.startswith("adaptrubric: error: cannot load the processor of 'some-org/uncached-vl': not in the "
                          f"local Hugging Face cache, and the hub at {endpoint} cannot be reached (")
    assert err.endswith("; " + hf.offline_help("some-org/uncached-vl"))
    assert "Retrying" not in run.stderr and not (tmp_path / "v.jsonl").exists()


class _Hub(BaseHTTPRequestHandler):
    """Answers HEAD / like a hub front page and 404 for every file; records the paths asked for."""

    paths: list = []

    def do_HEAD(self):
        self.paths.append(self.path)
        self.send_response(200 if self.path == "/" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD

    def log_message(self, *args):
        pass


@pytest.fixture
def hub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    _Hub.paths = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Hub.paths
    server.shutdown()
    server.server_close()


def test_the_check_says_why_the_hub_cannot_be_reached(monkeypatch, hub):
    from huggingface_hub import constants

    url, paths = hub
    monkeypatch.setattr(constants, "ENDPOINT", url)
    assert hf._hub_unreachable() is None and paths == ["/"]  # one request, and it answered
    closed = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setattr(constants, "ENDPOINT", closed)
    assert hf._hub_unreachable().startswith(f"{closed} cannot be reached (ConnectError")


def test_a_hub_that_accepts_but_never_answers_is_given_up_on_quickly(monkeypatch):
    from huggingface_hub import constants

    with socket.socket() as silent:  # the kernel accepts the connection; nobody ever reads or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        t0 = time.monotonic()
        reason = hf._hub_unreachable(timeout=0.5)
    assert time.monotonic() - t0 < 3 and reason is not None and "127.0.0.1" in reason


def test_a_hub_that_answers_is_still_asked_for_the_files(tmp_path, hub):
    url, paths = hub
    code = ("from adaptrubric_local.engine.hf import HFEngineConfig, load_model\n"
            "try:\n    load_model(HFEngineConfig(model='some-org/uncached-vl'))\n"
            "except ValueError as e:\n    print(e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path, url),
                         timeout=300)
    assert run.stdout.startswith("cannot load the processor of 'some-org/uncached-vl': "), run.stderr[-2000:]
    assert "cannot be reached" not in run.stdout
    assert "/" in paths and any(p.startswith("/some-org/uncached-vl/") for p in paths)  # the download was tried
