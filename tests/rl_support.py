"""Helpers for the tests that drive the real RL frameworks (test_rewards_verl.py, test_rewards_openrlhf.py):
a group of labelled rollouts of one task, a scripted verifier that counts how often it is built, a
text policy's tokenizer and config on disk (verl and OpenRLHF read one; no weights are needed), the GUI
environment stand-in, and the reward service as a subprocess with a scripted verifier."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from conftest import free_port, wait_until_loaded

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def load_file(path: Path, name: str):
    """Import a file by path under `name` (as the frameworks load reward files and agents)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def task_group(synth_set, task_id: str = "t000") -> list[dict]:
    """The rollouts of one task as canonical records (their labels differ)."""
    from adaptrubric_local import load_trajectories

    trajs = [t.to_dict() for t in load_trajectories(synth_set).trajectories if t.task_id == task_id]
    assert len({t["label"] for t in trajs}) == 2
    return trajs


def counting_verifier(trajs: list[dict]):
    """(factory, made): a factory of scripted verifiers passing exactly the rollouts labelled 1, and the
    list it appends to each time it builds one (the verifier must be built once per process)."""
    ex = load_file(EXAMPLES / "trl_grpo.py", "trl_example")
    made: list[int] = []
    lock = threading.Lock()

    def factory():
        with lock:
            made.append(1)
        return ex.scripted_verifier(trajs)

    return factory, made


def episode_for(pool: list[dict], action: str) -> dict:
    """The GUI environment stand-in: the recorded episode an action leads to (as examples/openrlhf_agent.py)."""
    return pool[sum(map(ord, action)) % len(pool)]


def save_policy(out: Path) -> Path:
    """A text policy's tokenizer and config (Qwen3, 1 layer) in `out`; nothing loads its weights."""
    from transformers import Qwen3Config

    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.tiny import build_tokenizer

    tok = build_tokenizer(tokenizer_corpus())
    tok.save_pretrained(out)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    cfg.architectures = ["Qwen3ForCausalLM"]
    cfg.save_pretrained(out)
    return out


# ----------------------------------------------------------------------------- the reward service
SERVER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from adaptrubric_local import FakeEngine
    from adaptrubric_local.engine.fake import default_script
    from adaptrubric_local.rewards.model import RewardModel
    from adaptrubric_local.rewards.serve import ServeConfig, serve

    label_of = {{s["screenshot"]: t.get("label", 0) for t in json.load(open({trajs!r})) for s in t["steps"]}}

    def script(req):  # passes exactly the rollouts labelled 1, recognised by their screenshots
        if req.kind != "verify":
            return default_script(req)
        ok = any(label_of.get(p) == 1 for p in req.images)
        return f"Checked.\\nSCORE: {{int(ok)}}\\nEVIDENCE_SUFFICIENT: yes\\nMISSING_EVIDENCE: none"

    roots = sorted({{str(Path(p).parent) for p in label_of}})  # the service reads paths inside its roots only
    serve(RewardModel(engine=FakeEngine(script=script), batch_window_ms=20, image_roots=roots),
          ServeConfig(port={port}, api_key={key!r}))
""")


def start_service(tmp: Path, trajs: list[dict], key: str | None = None):
    """`adaptrubric serve` on 127.0.0.1 with a verifier scripted from `trajs`' labels; (url, process)."""
    port = free_port()
    (tmp / "trajs.json").write_text(json.dumps(trajs))
    script = tmp / "server.py"
    script.write_text(SERVER.format(root=str(ROOT), trajs=str(tmp / "trajs.json"), port=port, key=key))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAPTRUBRIC_")}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    wait_until_loaded(url, proc, key)
    return url, proc


def stop_service(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(30)
