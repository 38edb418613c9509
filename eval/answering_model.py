#!/usr/bin/env python3
"""Does the answering tiny model answer? Builds it (`make-tiny-model --answering`), draws fresh data the
way it was trained (`synth --visible-outcome --size 96x192`, a data seed other than the build's), scores it
with `score --router rules --no-fine` and prints the parsed fraction and the agreement with the labels.

    python eval/answering_model.py                       # build (1-2 minutes on 2 cores) + 12 tasks, seed 1
    python eval/answering_model.py --model runs/tiny-answering --seeds 1,2,3 --tasks 24
    python eval/answering_model.py --plain               # also data without the banner (not checked)

Agreement counts every trajectory: an unparsed verdict does not agree. `--plain` also scores the same
draw without the outcome banner, where no completed outcome is visible at the end (the model, trained on
copies of successes without it labelled 0, scores every one 0 whatever the label; reported, not checked).
Exits 1 when a draw with the banner is parsed below --min-parsed (0.95) or agrees below
--min-agreement (0.9).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adaptrubric_local.synth import synthesize  # noqa: E402


def score(data: Path, model: Path, out: Path) -> dict:
    """`adaptrubric score DATA --model M --router rules --no-fine` in its own process; the figures of its
    verdict lines."""
    rec = json.loads((model / "answering.json").read_text()) if (model / "answering.json").is_file() else {}
    cap = str(rec.get("settings", {}).get("max_new_tokens", 24))
    cmd = [sys.executable, "-m", "adaptrubric_local.cli", "score", str(data), "--model", str(model), "--router",
           "rules", "--no-fine", "--verify-max-new-tokens", cap, "--out", str(out), "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"score failed (exit {p.returncode}):\n{p.stderr[-2000:]}")
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    n = len(rows)
    parsed = [r for r in rows if r["status"] == "ok"]
    agree = sum(1 for r in parsed if r["score"] == r["label"])
    ps = {y: [r["p_success"] for r in parsed if r["label"] == y and r.get("p_success") is not None] for y in (0, 1)}
    reasons: dict[str, int] = {}
    for r in rows:
        if r["status"] != "ok":
            why = str(r.get("parse_error") or r.get("error") or r["status"])[:60]
            reasons[why] = reasons.get(why, 0) + 1
    return {"n": n, "parsed": len(parsed), "agree": agree, "parsed_frac": len(parsed) / max(1, n),
            "agreement": agree / max(1, n), "agreement_parsed": agree / max(1, len(parsed)),
            "mean_p": {y: (sum(v) / len(v) if v else None) for y, v in ps.items()}, "not_parsed": reasons}


def line(name: str, f: dict) -> str:
    mp = " ".join(f"label {y}: {f['mean_p'][y]:.3f}" if f["mean_p"][y] is not None else f"label {y}: -"
                  for y in (0, 1))
    why = (" | not parsed: " + ", ".join(f"{k} x{v}" for k, v in f["not_parsed"].items())) if f["not_parsed"] else ""
    return (f"{name:<28} n={f['n']:<4} parsed {f['parsed']}/{f['n']} = {f['parsed_frac']:.3f}  agreement "
            f"{f['agree']}/{f['n']} = {f['agreement']:.3f} (of parsed {f['agreement_parsed']:.3f})  mean p_success "
            f"{mp}{why}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--model", help="an answering model folder already built (default: build one here)")
    ap.add_argument("--build-seed", type=int, default=0, help="`make-tiny-model --answering --seed` (default 0)")
    ap.add_argument("--seeds", default="1", help="data seeds to draw, comma-separated (default 1; the build "
                                                  "trains on seed --build-seed)")
    ap.add_argument("--tasks", type=int, default=12, help="`synth --tasks` (default 12)")
    ap.add_argument("--candidates", type=int, default=4, help="`synth --candidates` (default 4)")
    ap.add_argument("--size", default="96x192", help="`synth --size` (default 96x192, the model's own)")
    ap.add_argument("--plain", action="store_true", help="also score each draw without the banner (not checked)")
    ap.add_argument("--min-parsed", type=float, default=0.95)
    ap.add_argument("--min-agreement", type=float, default=0.9)
    ap.add_argument("--work", help="keep the files here (default: a temporary folder)")
    args = ap.parse_args()
    w, h = (int(x) for x in args.size.lower().split("x"))
    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory(prefix="answering_eval_") as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        model = Path(args.model) if args.model else work / "model"
        if not args.model:
            t0 = time.perf_counter()
            cmd = [sys.executable, "-m", "adaptrubric_local.cli", "make-tiny-model", str(model), "--answering",
                   "--seed", str(args.build_seed)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"make-tiny-model --answering failed (exit {p.returncode}):\n{p.stderr[-2000:]}", file=sys.stderr)
                return 1
            print(f"built: adaptrubric make-tiny-model MODEL --answering --seed {args.build_seed}  "
                  f"({time.perf_counter() - t0:.0f} s)")
        record = model / "answering.json"
        rec = json.loads(record.read_text()) if record.is_file() else {}
        print(f"model: {model} (" + (f"trained on {rec.get('trained_on', rec.get('settings'))}; held-out agreement "
                                     f"{rec.get('agreement_with_teacher')}, unparsed {rec.get('unparsed')})"
                                     if rec else "no answering.json: not built by make-tiny-model --answering)"))
        print(f"data: adaptrubric synth --visible-outcome --size {args.size} --tasks {args.tasks} --candidates "
              f"{args.candidates} --seed S; scored with score --router rules --no-fine", flush=True)
        failed, banner_runs = [], []
        for seed in seeds:
            for banner in (True, False) if args.plain else (True,):
                name = f"seed {seed}, " + ("outcome banner" if banner else "no banner")
                d = work / f"synth-{seed}-{'banner' if banner else 'plain'}"
                data = synthesize(d, n_tasks=args.tasks, candidates=args.candidates, size=(w, h), seed=seed,
                                  visible_outcome=banner)
                f = score(data, model, d / "verdicts.jsonl")
                print(line(name, f), flush=True)
                if banner:
                    banner_runs.append(f)
                if banner and (f["parsed_frac"] < args.min_parsed or f["agreement"] < args.min_agreement):
                    failed.append(f"{name}: parsed {f['parsed_frac']:.3f} (need {args.min_parsed}), agreement "
                                  f"{f['agreement']:.3f} (need {args.min_agreement})")
    worst_p = min(banner_runs, key=lambda f: f["parsed_frac"])
    worst_a = min(banner_runs, key=lambda f: f["agreement"])
    print(f"answering model on fresh data with the banner (seed {args.seeds}): parsed {worst_p['parsed']}/"
          f"{worst_p['n']} = {worst_p['parsed_frac']:.3f}, agreement {worst_a['agree']}/{worst_a['n']} = "
          f"{worst_a['agreement']:.3f}" + (" (the worst draw)" if len(banner_runs) > 1 else "")
          + (f"; build {rec['seconds']:.0f} s" if isinstance(rec.get("seconds"), (int, float)) else ""))
    if failed:
        print("CHECK FAILED: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
