"""Peak memory of the other commands that read a data set, at growing sizes: `audit` (every registered
perturbation, the originals and counterfactuals scored, the report and review page written), `distill
collect` (the labels as teacher), the reward service's path items (`to_trajectory` of a path into
the data file, what /score reads for one), `tts` (the data's trajectories in tasks of --group candidates,
over a verdict file written for them: one line per candidate, some unparsed and errors) and `labels
merge` (a labels file for every id, each label flipped), each in a fresh process, with the scripted
engine (no model: only the package's own work counts). The data is eval/stream_scale.py's: N
trajectories of --steps steps sharing --shots screenshots.

For each size and step, measured from outside (peak RSS of the child from wait4's rusage), it prints
seconds, ms per trajectory and peak RSS, then the growth of peak RSS and the ratio of time per
trajectory from the smallest size to the largest (with the growth a million trajectories would
have at that rate).

    python eval/stream_commands.py                       # 1,000 and 4,000 trajectories
    python eval/stream_commands.py --sizes 1000,20000
    python eval/stream_commands.py --sizes 10000,100000 --only tts,labels-merge

Exits 1 when a step fails or its output is short: an audit without a verdict line per original and
counterfactual, a collection that did not keep every trajectory, a path item that gave the wrong record,
curves over other than every candidate in tasks of --group, a copy without every label flipped.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("audit", "collect", "path", "tts", "labels-merge")


def child(step: str, data: str, out: str) -> None:
    """One measured step in this (fresh) process; prints its result JSON on the last line."""
    sys.path.insert(0, str(ROOT))
    from adaptrubric_local.dry_run import FakeEngine
    from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig

    class Dropped(list):
        """Where the scripted engine logs every batch of requests (`batches`, for tests): kept empty."""

        def append(self, _batch):
            pass

    t0 = time.perf_counter()
    if step == "audit":
        from adaptrubric_local.audit import get
        from adaptrubric_local.audit.run import run_audit

        engine = FakeEngine()
        engine.batches = Dropped()
        a = run_audit(AdaptRubric(engine, PipelineConfig(router="rules", fine=False)), data, out, get(),
                      progress=False, log=lambda s: None, build_engine=lambda options: engine)
        lines = sum(1 for f in Path(out).glob("verdicts*.jsonl") for _ in open(f, "rb"))
        res = {"n": a["originals"]["n"], "lines": lines, "want": a["cost"]["planned"]["audit_calls"]}
    elif step == "collect":
        from adaptrubric_local.distill.collect import CollectConfig, collect, label_teacher, teacher_pipeline
        from adaptrubric_local.formats.stream import stream_trajectories, trajectories

        teacher = label_teacher(trajectories(stream_trajectories(data)))
        teacher.batches = Dropped()
        m = collect(data, out, teacher, teacher_pipeline("labels"), CollectConfig(val_fraction=0.2, copy_images=False),
                    progress=False)
        res = {"n": m["counts"]["collected"], "lines": m["counts"]["collected"], "want": m["this_run"]["collected"]}
    elif step in ("tts", "labels-merge"):
        res = _cli_step(step, Path(data), Path(out))
    else:
        from adaptrubric_local.rewards.config import RewardConfig
        from adaptrubric_local.rewards.inputs import to_trajectory

        t = to_trajectory(Path(data).name, RewardConfig(data_root=str(Path(data).parent)), "item 0", confine=True)
        res = {"n": 1, "lines": int(t.id == "t0000000"), "want": 1}
    print(json.dumps({**res, "seconds": time.perf_counter() - t0}))


def _cli_step(step: str, data: Path, out: Path) -> dict:
    """`adaptrubric tts DATA --verdicts V` or `labels merge DATA --labels L`, over the files `inputs` wrote."""
    import contextlib
    import io

    from adaptrubric_local.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        if step == "tts":
            rc = main(["tts", str(data), "--verdicts", str(sibling(data, "verdicts")), "--out", str(out), "--quiet"])
        else:
            rc = main(["labels", "merge", str(data), "--labels", str(sibling(data, "labels")), "--out", str(out)])
    if rc:
        return {"n": -1, "lines": 0, "want": 1}
    if step == "tts":
        r = json.loads((out / "tts.json").read_text())
        return {"n": r["classification"]["n"], "lines": r["pool"]["tasks"], "want": r["pool"]["tasks"],
                "sizes": r["pool"]["trials_per_task"], "scored": r["pool"]["scored"]}
    r = json.loads((out / "merge.json").read_text())
    return {"n": r["trajectories"], "lines": r["labels"]["overridden"], "want": r["trajectories"]}


def sibling(data: Path, kind: str) -> Path:
    """The verdict or labels file `inputs` writes beside `data`."""
    return data.with_name(f"{data.stem}.{kind}.jsonl")


def inputs(data: Path, group: int | None = None) -> None:
    """Beside `data`: a verdict line per trajectory (with `group`: 1 in 16 unparsed, 1 in 64 an error) or a
    labels line per trajectory (its label flipped)."""
    kind = "verdicts" if group else "labels"
    with open(data, encoding="utf-8") as src, open(sibling(data, kind), "w", encoding="utf-8") as fh:
        for i, line in enumerate(src):
            d = json.loads(line)
            if group:
                status = "error" if i % 64 == 63 else "unparsed" if i % 16 == 15 else "ok"
                fh.write(json.dumps({"id": d["id"], "status": status, "score": None if status != "ok" else
                                     int((i * 7) % 3 != 0), "p_success": round((i * 37 % 101) / 101, 4),
                                     "model": "scripted", "task_id": d["task_id"], "label": d["label"]}) + "\n")
            else:
                fh.write(json.dumps({"id": d["id"], "label": 1 - d["label"]}) + "\n")


def wrong(step: str, r: dict, n: int, group: int) -> bool:
    """Whether a step's result is short or wrong."""
    if step == "path":
        return r["lines"] < r["want"]
    if r["lines"] < r["want"] or r["n"] != n:
        return True
    if step == "tts":
        tasks = -(-n // group)
        scored = n - n // 16  # every 16th candidate is unparsed or an error
        return r["lines"] != tasks or r["sizes"]["max"] != min(n, group) or r["scored"] != scored
    return False


def main() -> int:
    sys.path.insert(0, str(ROOT / "eval"))
    from stream_scale import build, measure

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,4000", help="comma-separated trajectory counts")
    ap.add_argument("--steps", type=int, default=8, help="steps per trajectory (default 8)")
    ap.add_argument("--shots", type=int, default=16, help="screenshots shared by all trajectories (default 16)")
    ap.add_argument("--group", type=int, default=8, help="candidates per task for `tts` (default 8)")
    ap.add_argument("--only", default=",".join(STEPS), help=f"comma-separated steps (default {','.join(STEPS)})")
    ap.add_argument("--work", help="folder for the data and outputs (default: a temporary one)")
    ap.add_argument("--child", nargs=3, metavar=("STEP", "DATA", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    sizes = sorted(int(x) for x in args.sizes.split(","))
    steps = [s for s in STEPS if s in args.only.split(",")]
    problems, rows = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; python eval/stream_commands.py --sizes "
              f"{args.sizes} --steps {args.steps} --shots {args.shots} --group {args.group} --only {','.join(steps)}")
        for n in sizes:
            data = build(work, n, args.steps, args.shots)
            grouped = build(work, n, args.steps, args.shots, group=args.group) if "tts" in steps else None
            if grouped:
                inputs(grouped, args.group)
            if "labels-merge" in steps:
                inputs(data)
            rows[n] = {s: measure(s, grouped if s == "tts" else data, work / f"{s}-{n}", script=__file__)
                       for s in steps}
            for s, r in rows[n].items():
                if wrong(s, r, n, args.group):
                    problems.append(f"{s} at {n}: {r}")
    print("| trajectories | step | seconds | ms/traj | peak RSS (MB) |")
    print("|---|---|---|---|---|")
    for n in sizes:
        for s in steps:
            r = rows[n][s]
            print(f"| {n:,} | {s} | {r['wall']:.1f} | {1000 * r['wall'] / n:.3f} | {r['rss_mb']:.0f} |")
    a, b = sizes[0], sizes[-1]
    print(f"\nfrom {a:,} to {b:,} trajectories ({b / a:g}x the data):")
    for s in steps:
        x, y = rows[a][s], rows[b][s]
        grow = y["rss_mb"] - x["rss_mb"]
        per_m = grow / max(1, b - a) * 1_000_000
        ratio = (y["wall"] / b) / (x["wall"] / a) if x["wall"] else float("nan")
        rate = f"at this rate {per_m:+.0f} MB per million" if grow > 0 else "no growth to extrapolate"
        print(f"  {s:12s} peak RSS {x['rss_mb']:.0f} -> {y['rss_mb']:.0f} MB ({grow:+.0f} MB; {rate}), "
              f"time per trajectory x{ratio:.2f}")
    for p in problems:
        print(f"FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
