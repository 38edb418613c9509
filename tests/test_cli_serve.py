"""`adaptrubric serve` and `python -m adaptrubric_local.cli.serve` (cli_serve.py): one flag per option of
the service and of the verifier (the keys of a reward.yaml), a flag given winning over --config. The
service itself is tested in test_rewards_serve.py."""
import subprocess
import sys

import pytest

from adaptrubric_local.cli.serve import main


def _serve_args(*argv):
    from adaptrubric_local.cli import build_parser

    return build_parser().parse_args(["serve", *argv])


def test_the_module_runs_with_the_same_flags_and_examples():
    out = subprocess.run([sys.executable, "-m", "adaptrubric_local.cli.serve", "--help-all"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("usage: adaptrubric serve") and "--fake-engine" in out
    assert "--max-batch-trajectories" in out and "--max-images" in out and "--max-batch-size" in out
    assert "curl -s 127.0.0.1:8000/health" in out  # the examples
    with pytest.raises(SystemExit):
        main(["--port", "not-a-number"])


def test_flags_override_the_config_file(tmp_path, monkeypatch):
    from adaptrubric_local.cli import serve as cli_serve

    cfg = tmp_path / "reward.yaml"
    cfg.write_text("reward: p_success\nmax_images: 6\nrouter: rules\nmax_batch_size: 4\n")
    seen = {}
    monkeypatch.setattr("adaptrubric_local.rewards.serve.serve", lambda rm, sc: seen.update(rm=rm, sc=sc))
    args = _serve_args("--config", str(cfg), "--max-images", "5", "--no-fine", "--port", "8123")  # loads on first use
    assert cli_serve.cmd_serve(args) == 0
    rm, sc = seen["rm"], seen["sc"]
    assert rm.config.reward == "p_success" and rm.pipeline_config.max_images == 5 and not rm.pipeline_config.fine
    assert rm.pipeline_config.router == "rules" and rm.engine_options["max_batch_size"] == 4
    assert rm.config.max_pending == 1024 and sc.port == 8123  # a service bounds its queue
    cfg.write_text("service_url: http://elsewhere:8000\n")
    with pytest.raises(ValueError, match="cannot itself forward to service_url"):
        cli_serve.cmd_serve(_serve_args("--config", str(cfg), "--fake-engine"))


def _docs_http_block() -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "rewards.md").read_text(encoding="utf-8")
    section = text.split("## The HTTP API", 1)[1]
    return section.split("```bash\n", 1)[1].split("```", 1)[0]


def test_the_docs_http_example_runs_as_written(tmp_path):
    """The curl example of docs/rewards.md, run by bash as written against `adaptrubric serve` on loopback; the only
    changes: --fake-engine in place of the model, and a free port in place of 8000."""
    import json
    import os
    import shutil
    from pathlib import Path

    from conftest import free_port, wait_until_loaded

    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (.ci/run installs it)")
    port = free_port()
    block = _docs_http_block().replace("--model Qwen/Qwen3-VL-4B-Instruct", "--fake-engine")
    block = block.replace("127.0.0.1:8000", f"127.0.0.1:{port}").replace("--port 8000", f"--port {port}")
    lines = block.splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if x.startswith("adaptrubric serve"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("ADAPTRUBRIC_API_KEY", None)
    before = subprocess.run(["bash", "-euc", "".join(lines[:at])], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    assert before.returncode == 0, before.stderr
    serve = subprocess.Popen(["bash", "-c", "exec " + lines[at]], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    try:
        wait_until_loaded(f"http://127.0.0.1:{port}", serve)
        after = subprocess.run(["bash", "-euc", "".join(lines[at + 1:])], cwd=tmp_path, env=env, capture_output=True,
                               text=True, timeout=120)
    finally:
        serve.terminate()
        serve.wait(timeout=60)
    assert after.returncode == 0, after.stderr
    decoder, text, docs = json.JSONDecoder(), after.stdout.strip(), []
    while text:
        doc, end = decoder.raw_decode(text)
        docs.append(doc)
        text = text[end:].strip()
    health, scored = docs
    assert health["status"] == "ok" and health["loaded"] is True and {"model", "pending", "stats"} <= set(health)
    (v,) = scored["verdicts"]
    assert (v["id"], v["status"], v["n_images"], scored["rewards"]) == ("t1", "ok", 2, [1.0])


def test_serve_with_a_model_ends_without_torchdynamos_exit_lines(tmp_path, tiny_model):
    """`adaptrubric serve` on a real (tiny) model, one trajectory scored, then stopped: what torch logs at
    exit (TorchDynamo's `I1204 ...` frame and compile summaries) is not on stderr, as the other
    third-party noise is not; only --verbose shows it."""
    import json
    import re
    import signal
    import urllib.request

    from conftest import free_port, make_png, wait_until_loaded

    for i in range(2):
        make_png(tmp_path / f"s{i}.png", seed=i)
    port = free_port()
    serve = subprocess.Popen([sys.executable, "-m", "adaptrubric_local.cli", "serve", "--model", str(tiny_model),
                              "--port", str(port), "--verify-max-new-tokens", "8"], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_loaded(f"http://127.0.0.1:{port}", serve)
        body = json.dumps({"trajectories": [{"id": "t1", "instruction": "Open the Notes app.", "steps": [
            {"screenshot": "s0.png", "action": "tap"}, {"screenshot": "s1.png", "action": "open"}]}]}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/score", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            assert json.loads(r.read())["verdicts"][0]["id"] == "t1"
    finally:
        serve.send_signal(signal.SIGTERM)
        _out, err = serve.communicate(timeout=120)
    assert "verifier loaded" in err
    assert "TorchDynamo" not in err and not re.search(r"(?m)^[IWE]\d{4} \d\d:\d\d", err), err[-2000:]
