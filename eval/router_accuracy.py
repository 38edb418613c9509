#!/usr/bin/env python3
"""Accuracy of the rules router on a labelled instruction file: overall, per family, per source group.

Usage:
  python eval/router_accuracy.py                      # the dev file (../shared/data/router_dev.jsonl)
  python eval/router_accuracy.py FILE.jsonl --show-errors
  python eval/router_accuracy.py tests/data/router_styled.jsonl --split fresh2   # the untouched split
  python eval/router_accuracy.py --loso               # leave-one-source-out on the dev file
  python eval/router_accuracy.py --loso --group file  # ... with each source file as its own group

Each line needs `instruction` and `label`; `--loso` also needs `source` ("owner/repo:path ...").

What leave-one-source-out means for a rules router. The router has no fitted weights: its parameters
are the verb lexicon and the refinement rules, written by hand with the whole dev file in view, so
plain per-group accuracy is resubstitution, not a hold-out. `--loso` removes, for each held-out group,
every head verb that only that group's instructions use (a verb nobody else needs would not have been
added without that group) and routes the group with the smaller lexicon. Verbs that the paper's own
router prompt (H.2) names in its family definitions (send, reply, create, edit, move, export ...) are
kept: they need no data. `--strict` keeps none of them (a pessimistic bound). Refinement rules (object
types, composite thresholds) are not removed, so the figure is still optimistic on that side. The
unbiased figure is a split written before the router was run on it and never used to change it
(tests/data/router_styled.jsonl --split fresh2; see tests/data/router_styled.md).
"""
import argparse
import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from adaptrubric_local.prompts import load_prompts  # noqa: E402
from adaptrubric_local.route import explain_rules, load_lexicon, route_rules  # noqa: E402
from adaptrubric_local.types import FAMILIES  # noqa: E402


def default_dev_file() -> Path:
    """router_dev.jsonl in the nearest `shared/data` folder above the repository (a worktree may sit deeper)."""
    for parent in [ROOT, *ROOT.parents]:
        cand = parent / "shared" / "data" / "router_dev.jsonl"
        if cand.is_file():
            return cand
    return ROOT / ".." / "shared" / "data" / "router_dev.jsonl"


def load_rows(path: Path, split: str | None = None) -> list[dict]:
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        for key in ("instruction", "label"):
            if key not in r:
                raise SystemExit(f"{path}: record line {i} has no field {key!r}")
        if split is None or r.get("split") == split:
            rows.append(r)
    return rows


def source_group(source: str, level: str) -> str:
    """'repo' groups by benchmark repository (owner/name before ':'), 'file' by the whole source."""
    return source if level == "file" else source.split(":", 1)[0].split(" ", 1)[0]


def head_verbs(instruction: str) -> set[str]:
    return {c.verb for c in explain_rules(instruction).clauses}


def paper_verbs() -> set[str]:
    """Lexicon verbs that the paper's router prompt names (any of verb, verbs, verbes, verb-y -> -ies, -d)."""
    text = " " + " ".join(load_prompts().router.lower().replace("/", " ").replace("-", " ").split()) + " "
    out = set()
    for v in load_lexicon().verbs:
        forms = {v, v + "s", v + "es", v + "d", v[:-1] + "ies" if v.endswith("y") else v}
        if any(f" {f} " in text or f" {f}," in text or f" {f})" in text for f in forms):
            out.add(v)
    return out


def loso(rows: list[dict], level: str, strict: bool = False) -> list[tuple[str, int, int, list[str]]]:
    """(group, correct, total, removed verbs) per group, each routed without its own-only verbs."""
    keep = set() if strict else paper_verbs()
    verbs = [head_verbs(r["instruction"]) for r in rows]
    groups = sorted({source_group(r["source"], level) for r in rows})
    out = []
    for g in groups:
        held = [i for i, r in enumerate(rows) if source_group(r["source"], level) == g]
        rest = set().union(*(verbs[i] for i in range(len(rows)) if i not in held))
        own = sorted(set().union(*(verbs[i] for i in held)) - rest - keep)
        lexicon = load_lexicon().without(own)
        correct = sum(route_rules(rows[i]["instruction"], lexicon).category == rows[i]["label"] for i in held)
        out.append((g, correct, len(held), own))
    return out


def report_loso(rows: list[dict], level: str, strict: bool = False) -> float:
    res = loso(rows, level, strict)
    kept = "none kept" if strict else f"the paper's router-prompt verbs kept: {', '.join(sorted(paper_verbs()))}"
    print(f"leave-one-source-out by {level} ({len(res)} groups): each group routed without the head verbs "
          f"only it uses ({kept})")
    if level == "repo":
        print(f"{'group':<45}{'correct':>8}{'total':>7}{'acc %':>8}  verbs removed")
        for g, c, n, own in res:
            print(f"{g[:44]:<45}{c:>8}{n:>7}{100 * c / n:>8.1f}  {', '.join(own) or '-'}")
    else:
        wrong = [(g, c, n, own) for g, c, n, own in res if c < n]
        removed = sum(bool(own) for _, _, _, own in res)
        print(f"groups with verbs removed: {removed}; groups with errors: {len(wrong)}")
        for g, c, n, own in wrong:
            print(f"  {c}/{n}  {g[-70:]}  removed: {', '.join(own) or '-'}")
    c = sum(x[1] for x in res)
    n = sum(x[2] for x in res)
    print(f"{'overall':<45}{c:>8}{n:>7}{100 * c / n:>8.1f}")
    print(f"loso_accuracy={100 * c / n:.1f}")
    return c / n


def report_plain(rows: list[dict], show_errors: bool) -> float:
    per = collections.defaultdict(lambda: [0, 0])
    confusion = collections.Counter()
    for r in rows:
        pred = route_rules(r["instruction"]).category
        per[r["label"]][1] += 1
        per[r["label"]][0] += pred == r["label"]
        if pred != r["label"]:
            confusion[(r["label"], pred)] += 1
            if show_errors:
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
    return c / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?", default=None, help="labelled JSONL (default: the dev file)")
    ap.add_argument("--show-errors", action="store_true", help="print each misrouted instruction")
    ap.add_argument("--split", default=None, help="keep only rows whose `split` field equals this (tune | final)")
    ap.add_argument("--loso", action="store_true", help="leave-one-source-out over the `source` field")
    ap.add_argument("--strict", action="store_true",
                    help="--loso also removes own-only verbs that the paper's router prompt names")
    ap.add_argument("--group", choices=("repo", "file"), default="repo",
                    help="--loso groups: benchmark repository (default) or each source file")
    args = ap.parse_args()
    path = Path(args.file) if args.file else default_dev_file()
    if not path.is_file():
        print(f"no such file: {path} (pass a JSONL file with instruction and label)", file=sys.stderr)
        return 2
    rows = load_rows(path, args.split)
    if not rows:
        print(f"{path}: no rows{f' with split={args.split!r}' if args.split else ''}", file=sys.stderr)
        return 2
    if args.loso:
        if any("source" not in r for r in rows):
            print(f"{path}: --loso needs a `source` field on every row", file=sys.stderr)
            return 2
        report_loso(rows, args.group, args.strict)
        return 0
    report_plain(rows, args.show_errors)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into `head`
        sys.stderr.close()
        sys.exit(0)
