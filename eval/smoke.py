"""The eval smoke set: every script under eval/ whose figure the README or docs/ quote, run at a small size
(seconds each) in its own process, the way a user runs it. Each script checks its own results and exits
non-zero when a check fails (an answer lost, duplicated or wrong, a failed parity check, a ratio it could
not compute); this runner fails when any of them does, so CI catches a benchmark that rotted under a
change before the docs quote it again.

    python eval/smoke.py                 # all of SMOKE, one after another (`make eval-smoke`, `.ci/run`)
    python eval/smoke.py bench_serve     # the ones whose names contain a word
    python eval/smoke.py --list

The answering tiny model (`make-tiny-model --answering`, seed 0) is built once, before the scripts whose
arguments name it ({answering}); each of them would otherwise build the same model again.

Scripts the test suite already runs through their own checks are listed in IN_SUITE (run there, not
twice); the few that cannot run here are in NOT_RUN with the reason. tests/test_eval_scripts.py checks
that every script in eval/ is in exactly one of the three.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# script -> its arguments for a run of seconds; {tmp} is a fresh folder for the script's files, {answering} the
# answering tiny model built once for the run (ANSWERING)
SMOKE: dict[str, list[str]] = {
    "bench_preprocess.py": ["--n", "4", "--repeats", "1", "--batch", "2"],
    "bench_score.py": ["--trajectories", "4", "--max-batch-size", "4", "--max-new-tokens", "4", "--repeats", "1"],
    "bench_serve.py": ["--smoke"],
    "bench_distill_tokens.py": ["--out", "{tmp}", "--tasks", "2", "--epochs", "1", "--max-new-tokens", "16"],
    "calls_per_traj.py": ["--tasks", "6", "--group", "2"],
    "calibration_data.py": ["--test", "300", "--repeats", "2", "--sizes", "20,50"],
    "distill_demo.py": ["--out", "{tmp}", "--tasks", "4", "--epochs", "2", "--min-agreement", "0"],
    "distill_plan_table.py": ["--check", str(ROOT / "docs" / "distillation.md")],
    "router_accuracy.py": [str(ROOT / "tests" / "data" / "router_styled.jsonl"), "--split", "fresh2"],
    "review_size.py": ["--tasks", "1"],
    "stream_scale.py": ["--sizes", "200,2000"],
    "stream_commands.py": ["--sizes", "50,200"],
    "bank_demo.py": ["--tasks-per-kind", "2"],
    # audits the answering tiny model on 16 trajectories
    "audit_answering.py": ["--out", "{tmp}", "--model", "{answering}", "--tasks", "8", "--candidates", "2"],
    # at full size (half a minute to score): the figures the docs quote
    "answering_model.py": ["--work", "{tmp}", "--model", "{answering}"],
    # scores 8 trajectories with 3 votes on the answering tiny model, then `eval`'s vote_rules section
    "vote_rules.py": ["--work", "{tmp}", "--model", "{answering}", "--votes", "3", "--tasks", "4", "--candidates", "2"],
    # the answering model as the judge (cascade.py's own default build: seed 0, 8 epochs, teacher_p 0.8), a
    # student built (seed 1), the judge served on vLLM when .venv-vllm exists
    "cascade.py": ["--work", "{tmp}", "--judge-model", "{answering}", "--tasks", "4", "--candidates", "2",
                   "--repeats", "100"],
    # GPU scripts at CPU size: the memory model against a measured prefill, prompt tokenization, every stage
    # of the GPU check and the distillation memory check on the tiny model
    "prefill_memory.py": ["--ci"],
    "bench_tokenize.py": ["--rows", "4", "--frames", "2"],
    "gpu_check.py": ["--dry-run", "--work", "{tmp}"],
    "gpu_distill_memory.py": ["--tiny", "--out", "{tmp}"],
}

# what {answering} is: `make-tiny-model DIR --answering`, the defaults (AnsweringSettings: seed 0, 8 epochs)
ANSWERING = ["-m", "adaptrubric_local.cli", "make-tiny-model", "{answering}", "--answering"]
ANSWERING_TIMEOUT = 900.0  # seconds for that build on a busy machine

# scripts that need longer than --timeout on a busy machine: script -> seconds (at least)
SLOW: dict[str, float] = {
    "audit_answering.py": 900,  # scores 16 trajectories 7 ways
    "answering_model.py": 900,  # minutes beside other jobs
    "vote_rules.py": 900,  # scores 8 trajectories with 3 votes
    "cascade.py": 1500,  # a student build, a vLLM server start, 8 runs
}

# scripts whose own checks the test suite runs at their full size: script -> the test file
IN_SUITE: dict[str, str] = {
    "distill_memory.py": "tests/test_distill_memory.py",
    "distill_soft_labels.py": "tests/test_distill_soft_labels.py",
    "gpu_bench.py": "tests/test_engine_hf.py",  # its --tiny CPU path, exit status checked
    "bench_engines.py": "tests/test_engine_vllm_engine.py",  # --ci, in .venv-vllm (make test-vllm)
    "batch_memory_table.py": "tests/test_engine_memory.py",  # docs/engines.md's table is what it prints
    "label_order.py": "tests/test_review_order.py",  # --ci, its checks on a small synthetic set
    "prompt_tokens.py": "tests/test_eval_scripts.py",  # on generated phone screens and the real tokenizer
}

NOT_RUN: dict[str, str] = {
    "mutation_table.py": "combines the results of a mutmut run (hours); its logic is tested in "
                         "tests/test_eval_scripts.py",
    "review_screenshot.py": "draws docs/review.png in Chromium; it quotes no figure",
    "_machine.py": "a helper of the benchmark scripts, not a script",
    "smoke.py": "this runner",
}


def run_one(name: str, args: list[str], timeout: float, answering: str = "") -> tuple[int, float, str, str]:
    """(exit status, seconds, stdout, stderr) of `python eval/NAME ARGS` (`python ARGS` when `name` is not
    a script's, as for ANSWERING)."""
    with tempfile.TemporaryDirectory(prefix=f"smoke_{Path(name).stem}_") as tmp:
        argv = [a.replace("{tmp}", str(Path(tmp) / "out")).replace("{answering}", answering) for a in args]
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        script = [str(ROOT / "eval" / name)] if name.endswith(".py") else []
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, *script, *argv], cwd=tmp, env=env,
                               capture_output=True, text=True, timeout=timeout)
            code, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as exc:
            text = [x.decode("utf-8", "replace") if isinstance(x, bytes) else (x or "")
                    for x in (exc.stdout, exc.stderr)]
            code, out, err = 124, text[0], text[1] + f"\n(killed after {timeout:.0f} s)"
        return code, time.perf_counter() - t0, out, err


def report(name: str, code: int, secs: float, out: str, err: str, failed: list[str]) -> None:
    """One run's line (its last line of output), and the end of its output when it failed (added to `failed`)."""
    last = ([ln for ln in out.splitlines() if ln.strip()] or ["(no output)"])[-1]
    print(f"{'ok  ' if code == 0 else 'FAIL'} {name:<26} {secs:6.1f} s  exit {code}  {last[:100]}", flush=True)
    if code != 0:
        failed.append(name)
        for text in (out, err):
            print("\n".join("    " + ln for ln in text.strip().splitlines()[-20:]), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("only", nargs="*", help="run the scripts whose names contain one of these words")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one script may take (default 300)")
    ap.add_argument("--list", action="store_true", help="print the set and exit")
    args = ap.parse_args(argv)
    chosen = {k: v for k, v in SMOKE.items() if not args.only or any(w in k for w in args.only)}
    if args.list or not chosen:
        for k, v in SMOKE.items():
            print(f"python eval/{k} {' '.join(v)}")
        for k, v in IN_SUITE.items():
            print(f"{k}: in the test suite ({v})")
        return 0 if args.list else 2
    failed, t_all = [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="smoke_answering_") as shared:
        answering = str(Path(shared) / "answering")
        needs = [name for name, v in chosen.items() if any("{answering}" in a for a in v)]
        if needs:
            build = run_one("answering", ANSWERING, ANSWERING_TIMEOUT, answering)
            report("make-tiny-model --answering", *build, failed)
            if build[0] != 0:  # no model: the scripts that take it are failed, not run
                failed += needs
        for name, script_args in chosen.items():
            if name not in failed:
                report(name, *run_one(name, script_args, max(args.timeout, SLOW.get(name, 0)), answering), failed)
    passed = len(set(chosen) - set(failed))
    print(f"eval smoke set: {passed}/{len(chosen)} passed in {time.perf_counter() - t_all:.0f} s"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
