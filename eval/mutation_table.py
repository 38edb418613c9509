"""Per-module mutation counts and score from mutmut 3's result files (mutants/**/*.meta).

Survivors named in the equivalents file (one mutant name per line, then its reason) count as
equivalent and leave the denominator. With --previous DIR (an older run's mutants/adaptrubric_local
folder), mutants this run did not execute take that run's result when their function's source hash
is unchanged (mutmut stores one hash per function), so a run restricted to some mutant names can be
combined with an earlier full run.

Examples:
  python eval/mutation_table.py --equivalent docs/mutation_equivalent.txt
  python eval/mutation_table.py --equivalent docs/mutation_equivalent.txt --previous old/mutants/adaptrubric_local -v
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


def table(mutants: Path, previous: Path | None, equivalent: set[str]):
    rows, left = {}, []
    for f in sorted(mutants.rglob("*.meta")):
        rel = f.relative_to(mutants).as_posix()[:-len(".meta")]
        new = json.loads(f.read_text())
        old_f = previous / (rel + ".meta") if previous else None
        old = json.loads(old_f.read_text()) if old_f and old_f.is_file() else {"exit_code_by_key": {}, "hash_by_function_name": {}}
        c = collections.Counter()
        for key, code in new["exit_code_by_key"].items():
            src = "this run"
            fn = _fn(key)
            if code is None and old["hash_by_function_name"].get(fn) == new["hash_by_function_name"].get(fn):
                code, src = old["exit_code_by_key"].get(key), "previous run"
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
    ap.add_argument("--previous", type=Path, help="an earlier run's result folder to fill in mutants not run here")
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
        print(f"| {m} | " + " | ".join(str(c[k]) for k in COLS) + f" | {100 * (c['killed'] + c['timeout']) / max(1, ne):.1f}% |")
    ne = tot["killed"] + tot["timeout"] + tot["survived"] + tot["no tests"]
    print("| **all** | " + " | ".join(f"**{tot[k]}**" for k in COLS)
          + f" | **{100 * (tot['killed'] + tot['timeout']) / max(1, ne):.1f}%** |")
    print(f"\nscore: {tot['killed'] + tot['timeout']} killed / {ne} non-equivalent run")
    if a.v:
        for st, src, key in left:
            print(f"{st}\t{src}\t{key}")


if __name__ == "__main__":
    main()
