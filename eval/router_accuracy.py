#!/usr/bin/env python3
"""Accuracy of the rules router on a labelled instruction file, overall and per family.

Usage: python eval/router_accuracy.py [FILE.jsonl] [--show-errors]
FILE defaults to ../shared/data/router_dev.jsonl; each line needs `instruction` and `label`.
"""
import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from adaptrubric_local.route import route_rules  # noqa: E402
from adaptrubric_local.types import FAMILIES  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?", default=str(Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
                                                   / "router_dev.jsonl"))
    ap.add_argument("--show-errors", action="store_true", help="print each misrouted instruction")
    args = ap.parse_args()
    path = Path(args.file)
    if not path.is_file():
        print(f"no such file: {path} (pass a JSONL file with instruction and label)", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    per = collections.defaultdict(lambda: [0, 0])
    confusion = collections.Counter()
    for r in rows:
        pred = route_rules(r["instruction"]).category
        per[r["label"]][1] += 1
        per[r["label"]][0] += pred == r["label"]
        if pred != r["label"]:
            confusion[(r["label"], pred)] += 1
            if args.show_errors:
                print(f"  gold={r['label']:<19} pred={pred:<19} {r['instruction'][:110]}")
    print(f"{'family':<20}{'correct':>8}{'total':>7}{'acc %':>8}")
    for fam in FAMILIES:
        c, n = per.get(fam, [0, 0])
        print(f"{fam:<20}{c:>8}{n:>7}{(100 * c / n if n else float('nan')):>8.1f}")
    c = sum(v[0] for v in per.values())
    n = sum(v[1] for v in per.values())
    print(f"{'overall':<20}{c:>8}{n:>7}{100 * c / n:>8.1f}")
    if confusion:
        print("most common confusions (gold -> predicted):",
              ", ".join(f"{g}->{p} x{k}" for (g, p), k in confusion.most_common(5)))
    print(f"accuracy={100 * c / n:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
