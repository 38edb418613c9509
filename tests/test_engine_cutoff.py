"""Cutting an endpoint's calls off (engine/cutoff.py): a server that holds its connections open and never
answers (a listening socket nobody reads: what a frozen server looks like to a client) keeps a call
waiting for its read timeout; `cut()` ends it at once and refuses new connections until `restore()`."""
import socket
import threading
import time

from openai_stub import Running, Stub

from adaptrubric_local.engine.base import Request
from adaptrubric_local.engine.endpoint import Endpoint
from adaptrubric_local.engine.openai_engine import OpenAIEngine, OpenAIEngineConfig


def _engine(url: str) -> OpenAIEngine:
    return OpenAIEngine(OpenAIEngineConfig(endpoint=Endpoint(url, "verifier", timeout=300.0, max_retries=1),
                                           max_new_tokens=8))


def test_a_call_to_a_silent_server_ends_when_cut_off_and_new_ones_are_refused_until_restored():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # connections complete in the kernel's backlog; nothing ever reads or answers them
    engine = _engine(f"http://127.0.0.1:{silent.getsockname()[1]}/v1")
    try:
        result = {}
        call = threading.Thread(target=lambda: result.update(out=engine.generate([Request(prompt="hi")])[0]))
        t0 = time.monotonic()
        call.start()
        call.join(2.0)
        assert call.is_alive()  # waiting on the silent server (its read timeout is 300 s)
        engine.cutoff.cut()
        call.join(30.0)
        assert not call.is_alive() and time.monotonic() - t0 < 30
        assert "Connection" in result["out"].error  # APIConnectionError, after the retry was refused at once
        t1 = time.monotonic()
        assert "Connection" in engine.generate([Request(prompt="again")])[0].error and time.monotonic() - t1 < 10
    finally:
        engine.close()
        silent.close()


def test_restore_connects_again():
    running = Running(Stub({}, served="verifier"))
    engine = _engine(running.url)
    try:
        engine.cutoff.cut()
        assert engine.generate([Request(prompt="hi")])[0].error
        engine.cutoff.restore()
        out = engine.generate([Request(prompt="hi")])[0]
        assert out.error is None and "CATEGORY" in out.text  # the stub answers a prompt without images as a route
    finally:
        engine.close()
        running.close()
