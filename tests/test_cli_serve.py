"""`adaptrubric serve` and `python -m adaptrubric_local.cli_serve` (cli_serve.py): the flags and `--set`
overrides. The service itself is tested in test_serve.py."""
import subprocess
import sys

import pytest

from adaptrubric_local.cli_serve import main, parse_sets


def test_set_values_are_read_as_yaml():
    assert parse_sets(["max_images=6", "reward = p_success", "fine=false", "image_roots=[a, b]", "x=null"]) == {
        "max_images": 6, "reward": "p_success", "fine": False, "image_roots": ["a", "b"], "x": None}
    with pytest.raises(ValueError, match="--set expects key=value, got 'max_images'"):
        parse_sets(["max_images"])


def test_the_module_runs_with_the_same_flags_and_examples():
    out = subprocess.run([sys.executable, "-m", "adaptrubric_local.cli_serve", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("usage: adaptrubric serve") and "--fake-engine" in out and "--max-batch" in out
    assert "curl -s 127.0.0.1:8000/health" in out  # the examples
    with pytest.raises(SystemExit):
        main(["--port", "not-a-number"])
