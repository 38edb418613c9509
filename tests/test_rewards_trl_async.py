"""TRL 1.16's async GRPO (trl/experimental/async_grpo/async_rollout_worker.py): `AsyncRolloutWorker.start`
pickles the reward functions and spawns a child that hides every GPU (`CUDA_VISIBLE_DEVICES=""`) and runs
them on each finished group. Here the recipe of docs/rewards.md ("TRL's async GRPO") is handed to TRL's own
worker, whose real spawned child scores against a real `adaptrubric serve --fake-engine` process; the error
a verifier that would load a model there raises is tested in this process with the child's
CUDA_VISIBLE_DEVICES="". The policy's vLLM server is
a scripted `/v1/completions` stand-in (one short reply per request), the only part not real."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from adaptrubric_local import FakeEngine, load_trajectories, rewards
from adaptrubric_local.rewards import RewardModel
from adaptrubric_local.rewards.child import check_gpus_visible
from adaptrubric_local.synth import synthesize

pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")
ROOT = Path(__file__).resolve().parents[1]


def docs_recipe() -> str:
    text = (ROOT / "docs" / "rewards.md").read_text(encoding="utf-8")
    section = text.split("## TRL's async GRPO", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_a_reward_model_pickles_as_its_options_and_loads_nothing():
    rm = RewardModel(service_url="http://127.0.0.1:9", reward="p_success", service_timeout=5.0)
    back = pickle.loads(pickle.dumps(rm))
    assert type(back) is RewardModel and back is not rm and not back.loaded
    assert (back.config.service_url, back.config.reward, back.config.service_timeout) == \
        ("http://127.0.0.1:9", "p_success", 5.0)
    reward = pickle.loads(pickle.dumps(partial(rewards.trl_reward, verifier=rm)))
    assert reward.func is rewards.trl_reward and reward.keywords["verifier"].config.service_url == "http://127.0.0.1:9"


def test_an_engine_instance_does_not_travel():
    with pytest.raises(TypeError, match=r"engine cannot be sent to another process.*service_url"):
        pickle.dumps(RewardModel(engine=FakeEngine()))


def test_a_local_model_in_a_process_without_gpus_names_the_fix(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    rm = RewardModel(model="Qwen/Qwen3-VL-4B-Instruct")
    with pytest.raises(RuntimeError) as err:
        rm.load()
    msg = str(err.value)
    assert "would load on the CPU" in msg and "adaptrubric serve --model Qwen/Qwen3-VL-4B-Instruct" in msg
    assert "service_url" in msg and "device_map='cpu'" in msg and not rm.loaded
    check_gpus_visible({"engine": "transformers", "model": "m", "device_map": "cpu"})  # the CPU on purpose
    check_gpus_visible({"engine": "openai", "openai_url": "http://h/v1"})              # a server: nothing loads
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    check_gpus_visible({"engine": "vllm", "model": "m"})                                # GPUs visible


class _Completions(BaseHTTPRequestHandler):
    """vLLM's `/v1/completions` as the rollout loop reads it (`_generate_one_turn`): token ids and their logprobs."""

    reply: list[int] = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.path == "/v1/completions" and body["return_token_ids"] is True
        out = json.dumps({"choices": [{"token_ids": self.reply,
                                       "logprobs": {"token_logprobs": [-0.5] * len(self.reply)}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


@pytest.fixture
def policy_server(qwen3_model):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_chat_template

    tok = AutoTokenizer.from_pretrained(qwen3_model)  # the real Qwen3 tokenizer, as a Qwen3 policy's
    tok.chat_template = qwen3_chat_template             # the Qwen3 template TRL parses replies of
    _Completions.reply = [*tok.encode("Done.", add_special_tokens=False), tok.eos_token_id]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Completions)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield tok, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def service(tmp_path):
    """A real `adaptrubric serve --fake-engine` process, its data root holding two synthetic tasks."""
    from conftest import free_port, wait_until_loaded

    data = synthesize(tmp_path / "data", n_tasks=2, candidates=1, size=(90, 200))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "ADAPTRUBRIC_API_KEY"}
    proc = subprocess.Popen([sys.executable, "-m", "adaptrubric_local.cli", "serve", "--fake-engine", "--port",
                             str(port), "--data-root", str(Path(data).parent)], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        wait_until_loaded(f"http://127.0.0.1:{port}", proc)
        yield port, load_trajectories(data).trajectories
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _worker(tok, url, reward_funcs, trajs, monkeypatch):
    """TRL's own AsyncRolloutWorker (the trainer's rank-0 object), groups of 2 generations per prompt."""
    from accelerate.state import PartialState
    from trl.experimental.async_grpo import async_rollout_worker as arw

    PartialState()  # as the trainer's Accelerator has, before the worker logs
    monkeypatch.setattr(arw, "is_vllm_available", lambda *a, **k: True)  # the parent's import check only
    ds = datasets.Dataset.from_dict({
        "prompt": [[{"role": "user", "content": t.instruction}] for t in trajs],
        "trajectory": [json.dumps(t.to_dict()) for t in trajs]})
    return arw.AsyncRolloutWorker(model_name="policy", dataset=ds, reward_funcs=reward_funcs, processing_class=tok,
                                  eos_token_ids=[tok.eos_token_id], num_generations=2, max_inflight_tasks=2,
                                  vllm_server_url=url, max_tokens=8, child_ready_timeout=240)


def test_the_docs_recipe_scores_in_trls_spawned_child(policy_server, service, monkeypatch):
    tok, url = policy_server
    port, trajs = service
    scope: dict = {}
    exec(compile(docs_recipe().replace("127.0.0.1:8000", f"127.0.0.1:{port}"), "docs/rewards.md", "exec"), scope)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # the child hides the GPUs itself
    worker = _worker(tok, url, [scope["reward"]], trajs, monkeypatch)
    worker.start()
    try:
        samples = [worker.rollout_buffer.get(timeout=120) for _ in range(4)]  # two groups of two
    finally:
        worker.stop()
    assert worker._process is None
    for s in samples:
        assert s.metrics["rewards/trl_reward"] == 1.0 and s.metrics["reward"] == 1.0  # the fake engine passes all
        assert s.completion[0]["content"] == "Done."
    import urllib.request

    health = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10).read())
    assert health["stats"]["trajectories"] >= 4 and health["stats"]["ok"] == health["stats"]["trajectories"]
