"""TRL 1.16's own GRPOTrainer, 2 steps on the CPU with a tiny random policy: the rewards come from each
completion's own rollout (returned by `rollout_func`), so they differ within a group and the policy
gets a gradient. Runs examples/trl_grpo.py (so the example stays runnable)."""
import importlib.util
import math
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("datasets")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "trl_grpo.py"


@pytest.mark.parametrize("judge", [False, True], ids=["verifier", "student-and-judge"])
def test_grpo_learns_from_own_rollouts(tmp_path, judge):
    spec = importlib.util.spec_from_file_location("trl_grpo_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(tmp_path, steps=2, fake_verifier=True, judge=judge)
    steps = [r for r in res["log"] if "loss" in r]
    assert len(steps) == 2
    for r in steps:
        assert r["frac_reward_zero_std"] < 1.0 and r["reward_std"] > 0
        assert r["grad_norm"] > 0 and math.isfinite(r["grad_norm"])
        assert r["adaptrubric/unparsed_rate"] == 0.0 and r["adaptrubric/error_rate"] == 0.0
    calls = res["rewards"]
    assert len(calls) == 2 and all(len(c) == 4 for c in calls)  # one group of 4 completions per step
    assert any(len(set(c)) > 1 for c in calls)  # rewards differ within a group
    if judge:  # every reward checked by the judge: the live agreement in stats() and in TRL's logs
        live = res["stats"]["cascade"]
        assert live["trajectories"] == 8 and live["decided_by_judge"] == 8
        a = live["agreement"]
        assert (a["n"], a["agree"]) == (8, 0) and a["ci95"][1] < 0.5 and a["warning"]  # the student: always wrong
        for r in steps:
            assert r["adaptrubric/judge_agreement"] == 0.0 and r["adaptrubric/judge_share"] == 1.0
            assert r["adaptrubric/judge_agreement_hi"] < 0.5 and r["adaptrubric/judge_warning"] == 1.0
    else:
        assert "cascade" not in res["stats"] and not any("judge" in k for r in steps for k in r)


def test_the_example_run_as_a_script_prints_its_lines_and_no_library_noise(tmp_path):
    """`python examples/trl_grpo.py --fake-verifier`: stdout holds its JSON lines only (not TRL's log
    dicts), stderr none of bitsandbytes' optional-kernel line or the libraries' deprecation warnings
    (--verbose shows them)."""
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run([sys.executable, str(EXAMPLE), "--fake-verifier", "--steps", "1", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [json.loads(x) for x in run.stdout.splitlines()]  # every stdout line is the example's JSON
    assert lines and lines[0]["step"] == 1 and "loss" in lines[0]
    assert "Failed to load CPU gemm_4bit_forward" not in run.stderr and "kernels-community" not in run.stderr
    assert "FutureWarning" not in run.stderr and "{'loss'" not in run.stderr + run.stdout, run.stderr[-3000:]
