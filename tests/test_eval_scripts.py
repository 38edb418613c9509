"""Scripts under eval/: eval/mutation_table.py combines the results of a restricted mutation run with
earlier runs."""
import importlib.util
import json
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
