"""Scripts under eval/: eval/mutation_table.py combines the results of a restricted mutation run with
earlier runs."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


spec = importlib.util.spec_from_file_location("mutation_table", ROOT / "eval" / "mutation_table.py")


mt = importlib.util.module_from_spec(spec)


spec.loader.exec_module(mt)


def _meta(folder: Path, codes: dict, hashes: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "m.py.meta").write_text(json.dumps({"exit_code_by_key": codes, "hash_by_function_name": hashes}))
    return folder


def test_not_run_mutants_take_the_newest_earlier_result_with_the_same_function_hash(tmp_path):
    new = _meta(tmp_path / "new", {"m.x_f__mutmut_1": 1, "m.x_f__mutmut_2": None, "m.x_g__mutmut_1": None,
                                   "m.x_h__mutmut_1": None, "m.x_h__mutmut_2": 0, "m.x_k__mutmut_1": -11},
                {"x_f": "a", "x_g": "b", "x_h": "c", "x_k": "d"})
    run2 = _meta(tmp_path / "run2", {"m.x_f__mutmut_2": None, "m.x_g__mutmut_1": 0, "m.x_h__mutmut_1": 0},
                 {"x_f": "a", "x_g": "b", "x_h": "changed"})
    run1 = _meta(tmp_path / "run1", {"m.x_f__mutmut_2": 1, "m.x_g__mutmut_1": 1, "m.x_h__mutmut_1": 1},
                 {"x_f": "a", "x_g": "b", "x_h": "c"})
    rows, left = mt.table(new, [run2, run1], equivalent={"m.x_h__mutmut_2"})
    # f_2: run2 did not run it, run1 killed it; g_1: run2 (newest) says survived; h_1: run2's hash differs,
    # run1's matches; h_2 survived but is listed as equivalent; k_1 crashed and stays unmeasured
    assert rows["adaptrubric_local/m.py"] == {"killed": 3, "survived": 1, "equivalent": 1, "crashed": 1}
    assert sorted(left) == [("crashed", "this run", "m.x_k__mutmut_1"),
                            ("survived", "previous run 1", "m.x_g__mutmut_1")]
    rows, left = mt.table(new, [], equivalent=set())
    assert rows["adaptrubric_local/m.py"] == {"killed": 1, "survived": 1, "not run": 3, "crashed": 1}


def _script(name: str):
    import sys

    path = ROOT / "eval" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(name, None)
    return mod


def test_prompt_tokens_are_what_score_reports(qwen3_engine, synth_set, capsys):
    """eval/prompt_tokens.py (the README's AndroidGen figure against the paper's 19.1K) counts what the
    transformers engine feeds the model: the same numbers as `score`'s prompt_tokens on the tiny Qwen3-VL
    built on the real tokenizer, at Qwen3-VL's own resolution. Then the script end to end on generated
    1080x2400 phone screens."""
    from adaptrubric_local import AdaptRubric, PipelineConfig, load_trajectories

    pt = _script("prompt_tokens")
    trajs = load_trajectories(synth_set).trajectories[:3]
    cfg = PipelineConfig(router="rules", fine=False, verify_max_new_tokens=1)
    counted = pt.count(trajs, qwen3_engine.processor, cfg)["verify"]
    scored = AdaptRubric(qwen3_engine, cfg).score(trajs)
    assert {v.id: v.prompt_tokens for v in scored} == {i: n for i, (n, _) in counted.items()}
    assert pt.main(["--synthetic", "1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("ratio=") and "paper, Table 5: 19,100" in out[-2]
    assert "   6    15300" in "\n".join(out)  # 6 frames of 1080x2400 at 2,550 visual tokens each


# ----------------------------------------------------------------------------- the eval smoke set
smoke_spec = importlib.util.spec_from_file_location("smoke", ROOT / "eval" / "smoke.py")
smoke = importlib.util.module_from_spec(smoke_spec)
smoke_spec.loader.exec_module(smoke)


def test_every_eval_script_is_in_the_smoke_set_or_says_why_not():
    import re

    scripts = {p.name for p in (ROOT / "eval").glob("*.py")}
    tables = [set(smoke.SMOKE), set(smoke.IN_SUITE), set(smoke.NOT_RUN)]
    assert [s for s in scripts if sum(s in t for t in tables) != 1] == []  # exactly one place each
    assert set().union(*tables) == scripts  # and nothing listed that is not there
    assert set(smoke.SLOW) <= set(smoke.SMOKE)  # a longer time limit only for a script the smoke set runs
    quoted = {m for f in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
              for m in re.findall(r"eval/(\w+\.py)", f.read_text(encoding="utf-8"))}
    cannot_run = {"mutation_table.py", "smoke.py"}  # hours of mutmut; the runner
    assert sorted(quoted - set(smoke.SMOKE) - set(smoke.IN_SUITE) - cannot_run) == []
    for script, test in smoke.IN_SUITE.items():  # the suite runs the script's own checks
        text = (ROOT / test).read_text(encoding="utf-8")
        # its check() or main() called, the script run as a process whose exit status is asserted, or (a
        # table of arithmetic) the figure it prints compared with the README's
        assert script in text and re.search(r"\.(check|main)\(|returncode == 0|\.markdown\(", text), (script, test)


def test_the_smoke_run_fails_when_one_script_fails(monkeypatch, capsys):
    monkeypatch.setattr(smoke, "SMOKE", {"router_accuracy.py": ["no-such-file.jsonl"],
                                         "calls_per_traj.py": ["--tasks", "2", "--group", "2"]})
    assert smoke.main([]) == 1
    out = capsys.readouterr().out
    assert "FAIL router_accuracy.py" in out and "no such file: no-such-file.jsonl" in out
    assert "ok   calls_per_traj.py" in out and "1/2 passed" in out and "failed: router_accuracy.py" in out


def test_answering_model_check_fails_on_a_model_that_does_not_answer(tiny_model, tmp_path):
    """eval/answering_model.py (which the smoke set runs at full size on the answering model) exits 1 on the
    random tiny model, whose verdicts do not parse: its check has teeth."""
    r = subprocess.run([sys.executable, str(ROOT / "eval" / "answering_model.py"), "--model", str(tiny_model),
                        "--tasks", "1", "--candidates", "2", "--work", str(tmp_path)],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "parsed 0/2 = 0.000" in r.stdout and "CHECK FAILED: seed 1, outcome banner: parsed 0.000" in r.stderr
