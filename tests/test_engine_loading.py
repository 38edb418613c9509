"""Loading a checkpoint (engine/loading.py): from a folder, from the cache, and when the hub cannot be reached:
a hub id that is not in the local cache fails in seconds with the message that says how to run offline,
instead of minutes of the hub client's retries; a hub that answers is still used. The network is made
unreachable for the process with HF_ENDPOINT on a closed loopback port (no test reads the network).
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from adaptrubric_local.engine import loading

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
    # the hub client's own retries took 144 s here; the quick check fails at once, and what is left is the
    # start-up of Python and transformers (about 10 s on 2 idle cores, over 20 s on busy ones)
    assert elapsed < 60, f"took {elapsed:.1f} s"
    assert run.returncode == 2, run.stderr[-2000:]
    err = run.stderr.strip().splitlines()[-1]
    assert err.startswith("adaptrubric: error: cannot load the processor of 'some-org/uncached-vl': not in the "
                          f"local Hugging Face cache, and the hub at {endpoint} cannot be reached (")
    assert err.endswith("; " + loading.offline_help("some-org/uncached-vl"))
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
    assert loading.hub_unreachable() is None and paths == ["/"]  # one request, and it answered
    closed = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setattr(constants, "ENDPOINT", closed)
    assert loading.hub_unreachable().startswith(f"{closed} cannot be reached (ConnectError")


def test_a_hub_that_accepts_but_never_answers_is_given_up_on_quickly(monkeypatch):
    from huggingface_hub import constants

    with socket.socket() as silent:  # the kernel accepts the connection; nobody ever reads or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        t0 = time.monotonic()
        reason = loading.hub_unreachable(timeout=0.5)
    assert time.monotonic() - t0 < 3 and reason is not None and "127.0.0.1" in reason


def test_a_hub_that_answers_is_still_asked_for_the_files(tmp_path, hub):
    url, paths = hub
    code = ("from adaptrubric_local.engine.hf_config import HFEngineConfig\n"
            "from adaptrubric_local.engine.loading import load_model\n"
            "try:\n    load_model(HFEngineConfig(model='some-org/uncached-vl'))\n"
            "except ValueError as e:\n    print(e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path, url),
                         timeout=300)
    assert run.stdout.startswith("cannot load the processor of 'some-org/uncached-vl': "), run.stderr[-2000:]
    assert "cannot be reached" not in run.stdout
    assert "/" in paths and any(p.startswith("/some-org/uncached-vl/") for p in paths)  # the download was tried


# ---------------------------------------------------------------------------------------------- folders, cache
def test_flash_attention_without_flash_attn_is_one_clear_line(tiny_model, monkeypatch):
    import importlib.util

    from adaptrubric_local.engine.hf_config import HFEngineConfig
    from adaptrubric_local.engine.loading import load_model

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else real(name, *a))
    with pytest.raises(ValueError) as e:
        load_model(HFEngineConfig(model=str(tiny_model), attn_implementation="flash_attention_2"))
    msg = str(e.value)
    assert "\n" not in msg and "flash-attn" in msg and "sdpa" in msg


def test_bin_only_folder_says_safetensors_are_required(tiny_model, tmp_path):
    import shutil

    from adaptrubric_local.engine.hf_config import HFEngineConfig
    from adaptrubric_local.engine.loading import load_model

    folder = tmp_path / "binmodel"
    shutil.copytree(tiny_model, folder)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"not loaded: a pickle is never opened")
    with pytest.raises(ValueError) as e:
        load_model(HFEngineConfig(model=str(folder)))
    msg = str(e.value)
    assert "\n" not in msg and "safetensors" in msg and "save_pretrained" in msg and str(folder) in msg


HUB_SCRIPT = r"""
import json, socket, sys
attempts = []
def guard(*a, **k):
    attempts.append(repr(a[:1])[:80])
    raise OSError("network blocked by the test")
socket.socket.connect = guard
socket.create_connection = guard
from huggingface_hub import constants
from adaptrubric_local.engine.hf_config import HFEngineConfig
from adaptrubric_local.engine.loading import load_model
res = {}
for name in sys.argv[1:]:
    if name == "--offline":
        constants.HF_HUB_OFFLINE = True  # as HF_HUB_OFFLINE=1 would
        continue
    try:
        model, proc = load_model(HFEngineConfig(model=name))
        res[name] = "ok " + type(model).__name__
    except ValueError as e:
        res[name] = "ValueError " + str(e)
print(json.dumps({"results": res, "attempts": attempts}))
"""


def _fake_hub_cache(hub, repo, src, skip=()):
    """The Hugging Face cache layout (refs/main -> snapshots/<commit>/files) for `repo`, from a saved model."""
    import shutil

    base = hub / f"models--{repo.replace('/', '--')}"
    snap = base / "snapshots" / ("0123456789abcdef" * 3)[:40]
    snap.mkdir(parents=True)
    for f in src.iterdir():
        if f.name not in skip:
            shutil.copy(f, snap / f.name)
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(snap.name)


def test_cached_hub_id_loads_without_any_network_access(tiny_model, tmp_path):
    hub = tmp_path / "hf" / "hub"
    _fake_hub_cache(hub, "tiny-org/cached-vl", tiny_model)
    _fake_hub_cache(hub, "tiny-org/partial-vl", tiny_model, skip=("model.safetensors",))
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_CACHE=str(hub), PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, "-c", HUB_SCRIPT, "tiny-org/cached-vl", "--offline", "tiny-org/partial-vl"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["attempts"] == []  # not one connection, although HF_HUB_OFFLINE was not set
    assert got["results"]["tiny-org/cached-vl"] == "ok Qwen3VLForConditionalGeneration"
    partial = got["results"]["tiny-org/partial-vl"]
    assert partial.startswith("ValueError") and "\n" not in partial
    assert "hf download tiny-org/partial-vl" in partial and "HF_HUB_OFFLINE=1" in partial


# ---------------------------------------------------------------------------------------------- adapters, attention
def _random_adapter(tiny_model, out):
    """A LoRA adapter with non-zero weights, saved in float32 from a float32 base (as `distill train` saves)."""
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3VLForConditionalGeneration

    base = Qwen3VLForConditionalGeneration.from_pretrained(tiny_model, local_files_only=True)
    lora = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, init_lora_weights=False,
                                           target_modules=r".*language_model.*\.(q_proj|v_proj|down_proj)"))
    lora.save_pretrained(out)
    return out


@pytest.mark.parametrize("quantised", [False, True])
def test_an_adapter_runs_in_the_bases_dtype_without_a_float32_copy_of_its_input(tiny_model, synth_set, tmp_path,
                                                                                quantised):
    """A bf16 base (and a 4-bit one computing in bf16) on the CPU: the LoRA weights are bf16 and each adapted
    layer's input reaches lora_A as the very tensor the layer got. peft's LoRA Linear.forward casts the input
    to lora_A's dtype (peft 0.21.2, tuners/lora/layer.py line 1100; tuners/lora/bnb.py Linear4bit.forward
    the same): with float32 adapter weights (peft's autocast_adapter_dtype=True) that is a float32 copy."""
    from peft.tuners.lora import LoraLayer

    from adaptrubric_local import load_trajectories
    from adaptrubric_local.engine.base import Request
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    if quantised:
        pytest.importorskip("bitsandbytes")
    adapter = _random_adapter(tiny_model, tmp_path / "adapter")
    eng = HFEngine(HFEngineConfig(model=str(tiny_model), adapter=str(adapter), dtype="bf16", load_in_4bit=quantised,
                                  max_new_tokens=2))
    try:
        lora = {n: p.dtype for n, p in eng.model.named_parameters() if ".lora_" in n}
        assert lora and set(lora.values()) == {torch.bfloat16}, set(lora.values())
        seen, hooks = [], []
        for layer in (m for m in eng.model.modules() if isinstance(m, LoraLayer)):
            got = {}
            hooks.append(layer.register_forward_pre_hook(lambda m, a, got=got: got.update(x=a[0])))
            hooks.append(layer.lora_A["default"].register_forward_pre_hook(
                lambda m, a, got=got: seen.append((a[0].dtype, a[0] is got["x"]))))
        t = load_trajectories(synth_set).trajectories[0]
        eng.next_token_probs([Request(prompt="Judge.", images=[s.screenshot for s in t.steps[:2]])], ["SCORE: "])
        for h in hooks:
            h.remove()
        assert len(seen) == 3 * 2  # q, v, down in each of the 2 layers
        assert all(dtype == torch.bfloat16 and same for dtype, same in seen), seen
    finally:
        eng.close()


def _fake_flash_attn(root, dist: str, version: str):
    """An importable `flash_attn` module installed by distribution `dist` at `version` (no kernels)."""
    (root / "flash_attn").mkdir(parents=True)
    (root / "flash_attn" / "__init__.py").write_text(f"__version__ = '{version}'\n")
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "top_level.txt").write_text("flash_attn\n")
    return root


@pytest.mark.parametrize("dist,version,why", [
    ("flash-attn", "2.1.0", "flash-attn 2.1.0 is older than 2.3.3"),
    ("flash-attn-4", "4.0.0b1", "the flash_attn module comes from flash-attn-4, not from flash-attn"),
])
def test_flash_attn_that_transformers_would_refuse_falls_back_to_sdpa(tmp_path, monkeypatch, capsys, dist, version,
                                                                      why):
    from adaptrubric_local.engine.hf_config import HFEngineConfig

    monkeypatch.syspath_prepend(str(_fake_flash_attn(tmp_path / "site", dist, version)))
    assert loading.attn_implementation_for(HFEngineConfig(model="m"), cuda=True) == "sdpa"
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("attention: sdpa, not flash_attention_2 (") and why in err
    with pytest.raises(ValueError, match="flash_attention_2 cannot run: " + why.split(" is ")[0]):
        loading.attn_implementation_for(HFEngineConfig(model="m", attn_implementation="flash_attention_2"), cuda=True)


def test_a_usable_flash_attn_is_chosen_on_cuda(tmp_path, monkeypatch, capsys):
    import transformers.utils

    from adaptrubric_local.engine.hf_config import HFEngineConfig

    monkeypatch.syspath_prepend(str(_fake_flash_attn(tmp_path / "site", "flash-attn", "2.8.3")))
    monkeypatch.setattr(transformers.utils, "is_flash_attn_2_available", lambda: True)  # it needs CUDA itself
    assert loading.attn_implementation_for(HFEngineConfig(model="m"), cuda=True) == "flash_attention_2"
    assert capsys.readouterr().err == ""
