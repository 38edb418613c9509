"""Per-module mutation counts and score from mutmut 3's result files (mutants/**/*.meta).

Survivors named in the equivalents file (one mutant name per line, then its reason) count as
equivalent and leave the denominator. With --previous DIR (an older run's mutants/adaptrubric_local
folder; repeatable, newest first), mutants this run did not execute take the first of those runs'
results that exists for them, provided their function's source hash is unchanged since (mutmut
stores one hash per function), so a run restricted to some mutant names can be combined with
earlier runs.

Examples:
  python eval/mutation_table.py --equivalent docs/mutation_equivalent.txt
  python eval/mutation_table.py --equivalent docs/mutation_equivalent.txt \\
      --previous run2/mutants/adaptrubric_local --previous run1/mutants/adaptrubric_local -v
"""
from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 36: "timeout", -24: "timeout",
          24: "timeout", 152: "timeout", 255: "timeout", -11: "crashed", -9: "crashed", None: "not run"}
# crashed: the forked worker died (SIGSEGV/SIGKILL) before any test result; not counted in the score
COLS = ["killed", "timeout", "survived", "equivalent", "no tests", "crashed", "not run"]


def _fn(key: str) -> str:
    return key.rsplit("__mutmut_", 1)[0].split(".")[-1]


def _earlier(previous: list[Path], rel: str) -> list[dict]:
    """The earlier runs' result files for one module, newest first (missing ones skipped)."""
    files = [p / (rel + ".meta") for p in previous]
    return [json.loads(f.read_text()) for f in files if f.is_file()]


def _fill(key: str, fn_hash, olds: list[dict]):
    """The first earlier result for `key` whose function had the same source hash, and its run."""
    for i, old in enumerate(olds, start=1):
        code = old["exit_code_by_key"].get(key)
        if code is not None and old["hash_by_function_name"].get(_fn(key)) == fn_hash:
            return code, f"previous run {i}"
    return None, "this run"


def table(mutants: Path, previous: list[Path], equivalent: set[str]):
    rows, left = {}, []
    for f in sorted(mutants.rglob("*.meta")):
        rel = f.relative_to(mutants).as_posix()[:-len(".meta")]
        new = json.loads(f.read_text())
        olds = _earlier(previous, rel)
        c = collections.Counter()
        for key, code in new["exit_code_by_key"].items():
            src = "this run"
            if code is None:
                code, src = _fill(key, new["hash_by_function_name"].get(_fn(key)), olds)
            st = STATUS.get(code, f"exit {code}")
            if st in ("survived", "no tests") and key in equivalent:
                st = "equivalent"
            if st in ("survived", "no tests", "crashed", "not run"):
                left.append((st, src, key))
            c[st] += 1
        rows[f"adaptrubric_local/{rel}"] = c
    return rows, left


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutants", type=Path, default=Path("mutants/adaptrubric_local"), help="this run's result folder")
    ap.add_argument("--previous", type=Path, action="append", default=[],
                    help="an earlier run's result folder to fill in mutants not run here (repeatable, newest first)")
    ap.add_argument("--equivalent", type=Path, help="file of equivalent mutant names (name, then reason)")
    ap.add_argument("-v", action="store_true", help="list every survivor, untested and not-run mutant")
    a = ap.parse_args()
    eq = set()
    if a.equivalent:
        eq = {ln.split()[0] for ln in a.equivalent.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    rows, left = table(a.mutants, a.previous, eq)
    print("| module | " + " | ".join(COLS) + " | score |\n|" + "---|" * (len(COLS) + 2))
    tot = collections.Counter()
    for m, c in rows.items():
        tot.update(c)
        ne = c["killed"] + c["timeout"] + c["survived"] + c["no tests"]
        score = 100 * (c["killed"] + c["timeout"]) / max(1, ne)
        print(f"| {m} | " + " | ".join(str(c[k]) for k in COLS) + f" | {score:.1f}% |")
    ne = tot["killed"] + tot["timeout"] + tot["survived"] + tot["no tests"]
    print("| **all** | " + " | ".join(f"**{tot[k]}**" for k in COLS)
          + f" | **{100 * (tot['killed'] + tot['timeout']) / max(1, ne):.1f}%** |")
    print(f"\nscore: {tot['killed'] + tot['timeout']} killed / {ne} non-equivalent run")
    if a.v:
        for st, src, key in left:
            print(f"{st}\t{src}\t{key}")


if __name__ == "__main__":
    main()
