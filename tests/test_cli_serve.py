"""`adaptrubric serve` and `python -m adaptrubric_local.cli_serve` (cli_serve.py): one flag per option of
the service and of the verifier (the keys of a reward.yaml), a flag given winning over --config. The
service itself is tested in test_serve.py."""
import subprocess
import sys

import pytest

from adaptrubric_local.cli_serve import main


def _serve_args(*argv):
    from adaptrubric_local.cli import build_parser

    return build_parser().parse_args(["serve", *argv])


def test_the_module_runs_with_the_same_flags_and_examples():
    out = subprocess.run([sys.executable, "-m", "adaptrubric_local.cli_serve", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("usage: adaptrubric serve") and "--fake-engine" in out
    assert "--max-batch-trajectories" in out and "--max-images" in out and "--max-batch-size" in out
    assert "curl -s 127.0.0.1:8000/health" in out  # the examples
    with pytest.raises(SystemExit):
        main(["--port", "not-a-number"])


def test_flags_override_the_config_file(tmp_path, monkeypatch):
    from adaptrubric_local import cli_serve

    cfg = tmp_path / "reward.yaml"
    cfg.write_text("reward: p_success\nmax_images: 6\nrouter: rules\nmax_batch_size: 4\n")
    seen = {}
    monkeypatch.setattr("adaptrubric_local.serve.serve", lambda rm, sc: seen.update(rm=rm, sc=sc))
    args = _serve_args("--config", str(cfg), "--max-images", "5", "--no-fine", "--fake-engine", "--port", "8123")
    assert cli_serve.cmd_serve(args) == 0
    rm, sc = seen["rm"], seen["sc"]
    assert rm.config.reward == "p_success" and rm.pipeline_config.max_images == 5 and not rm.pipeline_config.fine
    assert rm.pipeline_config.router == "rules" and rm.engine_options["max_batch_size"] == 4
    assert rm.config.max_pending == 1024 and sc.port == 8123  # a service bounds its queue
    cfg.write_text("service_url: http://elsewhere:8000\n")
    with pytest.raises(ValueError, match="cannot itself forward to service_url"):
        cli_serve.cmd_serve(_serve_args("--config", str(cfg), "--fake-engine"))
