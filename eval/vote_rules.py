#!/usr/bin/env python3
"""Each vote rule's precision, recall, NPV and TNR from ONE scoring run with `--votes k`, on the answering tiny
model (`make-tiny-model --answering`) and synthetic data: `synth --visible-outcome` (the outcome banner the
model was trained on) and, with `--plain`, the same draw without it (harder: the model was not trained on it).
The verdict lines keep every vote, so `eval` computes every rule from them (its `vote_rules` section,
adaptrubric_local/evaluation/vote_rules.py); nothing is scored twice.

    python eval/vote_rules.py --model runs/tiny-answering --votes 5 --tasks 12 --plain
    python eval/vote_rules.py --votes 5                     # builds the answering model first (1-2 minutes)

Prints one table per draw and writes `vote_rules.json` under --work. Exits 1 when a line lacks its votes or a
rule's figures do not count every labelled trajectory (error lines count as predicted failures, as in `eval`).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adaptrubric_local.evaluation.vote_rules import render_table  # noqa: E402
from adaptrubric_local.synth import synthesize  # noqa: E402


def run(cmd: list[str]) -> None:
    p = subprocess.run([sys.executable, "-m", "adaptrubric_local.cli", *cmd], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:2])} failed (exit {p.returncode}):\n{p.stderr[-2000:]}")


def figures(data: Path, model: Path, votes: int, out: Path) -> tuple[list, dict]:
    rec = json.loads((model / "answering.json").read_text()) if (model / "answering.json").is_file() else {}
    cap = str(rec.get("settings", {}).get("max_new_tokens", 24))
    run(["score", str(data), "--model", str(model), "--router", "rules", "--no-fine", "--verify-max-new-tokens", cap,
         "--votes", str(votes), "--out", str(out), "--quiet"])
    rows = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    missing = [r["id"] for r in rows if r["status"] != "error" and (r.get("votes") is None or len(r["votes"]) != votes)]
    if missing:
        raise SystemExit(f"{out}: {len(missing)} line(s) without their {votes} votes, e.g. {missing[0]}")
    ev = out.with_name(out.stem + "-eval")
    run(["eval", str(data), "--verdicts", str(out), "--out", str(ev), "--no-review", "--bootstrap", "0", "--quiet"])
    m = json.loads((ev / "metrics.json").read_text())
    figs, o = m.get("vote_rules") or [], m["overall"]
    if not figs or any(f["n"] != o["n"] for f in figs):
        raise SystemExit(f"{ev / 'metrics.json'}: the vote_rules section does not count every labelled trajectory")
    info = {"n": o["n"], "positives": o["positives"],
            "unparsed_votes": sum(v is None for r in rows if r.get("label") in (0, 1) for v in r.get("votes") or ())}
    return figs, info


def table(name: str, figs: list, info: dict, votes: int) -> str:
    head = (f"{name}: {info['n']} trajectories ({info['positives']} successes), --votes {votes}, "
            f"{info['unparsed_votes']} unparsed vote(s)\n")
    return head + render_table(figs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="an answering model folder already built (default: build one here)")
    ap.add_argument("--votes", type=int, default=5, help="samples per trajectory (default 5)")
    ap.add_argument("--seed", type=int, default=1, help="`synth --seed` (default 1, not the build's 0)")
    ap.add_argument("--tasks", type=int, default=12, help="`synth --tasks` (default 12)")
    ap.add_argument("--candidates", type=int, default=4, help="`synth --candidates` (default 4)")
    ap.add_argument("--plain", action="store_true", help="also the same draw without the outcome banner")
    ap.add_argument("--work", help="keep the files here (default: a temporary folder)")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="vote-rules-"))
    work.mkdir(parents=True, exist_ok=True)
    model = Path(args.model) if args.model else work / "tiny-answering"
    if not args.model:
        run(["make-tiny-model", str(model), "--answering"])
    report = {}
    for banner in [True, False] if args.plain else [True]:
        name = "banner" if banner else "plain"
        data = synthesize(work / f"data-{name}", n_tasks=args.tasks, candidates=args.candidates, size=(96, 192),
                          seed=args.seed, visible_outcome=banner)
        figs, info = figures(Path(data), model, args.votes, work / f"verdicts-{name}.jsonl")
        print(table(name, figs, info, args.votes))
        report[name] = {**info, "rules": figs}
    (work / "vote_rules.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"written: {work / 'vote_rules.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
