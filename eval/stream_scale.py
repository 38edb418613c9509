"""Scoring at scale: time per trajectory and peak memory of `score`, its resume, `eval` and `calibrate` over data sets
of growing size, each in a fresh process, with the scripted verifier (dry_run.FakeEngine: no model, so
only the package's own work counts: loading, routing, cues, prompts, writing, reading back).

Each size N is a canonical JSONL of N trajectories of --steps steps sharing --shots screenshots (the
paper's default path: the model router and fine cues, answered by the script). For each N, in a child
process each, measured from outside (peak RSS of the child from wait4's rusage):
  score   the data into a fresh verdict file;
  resume  of the finished file (nothing left to do: what a resume reads before it can start);
  first   a resume of the file with its last --cut lines removed: seconds until the first new engine call,
          and its summary's counts against the uncut file's (they must be equal);
  eval    `adaptrubric eval DATA --verdicts V --no-review` (the metrics of the finished file, read into
          columns);
  review  `adaptrubric eval DATA --verdicts V`, the default path: the metrics and the review page, a sample
          of --review-cards cards (2,000) of a larger run;
  labels  `adaptrubric eval DATA --verdicts V --no-review --labels L`, L a labels file that flips the label
          of every tenth trajectory (the labels put on the columns): its run record must count them
          overridden, and the positives must move by as many;
  calibrate  `adaptrubric calibrate DATA --verdicts V --out C` (the fit from columns): C must be fitted on
          every verdict, with the data's positives;
  apply   `adaptrubric calibrate --apply C --verdicts V --out V2`, line by line: V2 must hold every line.
  cascade `score` with a judge into a verdict file of its own (cli/cascade.py `run_cascade`, the scripted
          verifier as student and as judge): the student unsure (p_success 0.55, inside the band 0.5-0.6) on
          one instruction in 5, a 5% spot check; the lines, the judge calls beside the student's batches,
          and the `cascade` summary read back from the file.
Prints one row per size and step, the growth of peak RSS and the ratio of time per trajectory from the
smallest size of at least 10,000 (else the smallest) to the largest.

    python eval/stream_scale.py                          # 1k, 10k, 100k
    python eval/stream_scale.py --sizes 10000,1000000    # a million lines: about half an hour on 2 cores
    python eval/stream_scale.py --sizes 10000,1000000 --work runs/scale --only eval,review   # again, on
                                                         # the files an earlier run left in --work

Exits 1 when a check fails: a verdict file without exactly one line per trajectory, a resume that scored
anything of a finished file, a cut resume whose counts differ from the uncut file's, a cascade whose
summary does not count every trajectory or sent none to the judge, a missing figure, the checks of
labels, calibrate and apply above.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COUNTS = ("n", "scored", "unparsed", "errors", "positives", "hit_cap", "hit_context")
STEPS = ("score", "resume", "first", "eval", "review", "labels", "calibrate", "apply", "cascade")
BAND, SPOT_CHECK = (0.5, 0.6), 0.05  # the cascade step's


def build(folder: Path, n: int, steps: int, shots: int, group: int | None = None) -> Path:
    """N trajectories (8 task families' worth of instructions) over `shots` shared screenshots; with
    `group`, every `group` consecutive trajectories share a task_id (candidates of one task)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for k in range(shots):
        path = folder / "shots" / f"s{k}.png"
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            Image.new("RGB", (90, 200), (20 * k % 255, 40, 90)).save(path)
    tasks = ["Open the settings app and turn on Wi-Fi", "Search for a pizza place near me and open its page",
             "Add milk to my shopping list", "Send a message to Anna saying I am late",
             "Set an alarm for 7 am tomorrow", "Delete the last photo in the gallery",
             "Create a note titled Ideas", "Play the next song in the music app"]
    data = folder / (f"data-{n}.jsonl" if group is None else f"data-{n}-groups{group}.jsonl")
    with open(data, "w", encoding="utf-8") as fh:
        for i in range(n):
            t = i % 64
            task = f"task{t if group is None else i // group}"
            steps_out = [{"screenshot": f"shots/s{(i + s) % shots}.png", "action": f"click({10 + s}, {20 + s})",
                          "action_type": "click", "thought": "tap the next control on the way to the goal"}
                         for s in range(steps)]
            fh.write(json.dumps({"id": f"t{i:07d}", "instruction": f"{tasks[t % 8]} ({t})", "task_id": task,
                                 "label": i % 2, "steps": steps_out}) + "\n")
    return data


def child(step: str, data: str, out: str) -> None:
    """One measured step, in this (fresh) process; prints its result JSON on the last line."""
    sys.path.insert(0, str(ROOT))
    t0 = time.perf_counter()
    if step in COMMANDS:
        from adaptrubric_local.cli import main

        rc = main(command(step, data, out))
        print(json.dumps({"rc": rc, "seconds": time.perf_counter() - t0}))
        return
    from adaptrubric_local.dry_run import FakeEngine
    from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
    from adaptrubric_local.scoring import score_file

    first: list[float] = []

    class Timed(FakeEngine):
        """The scripted engine, noting when its first call comes and keeping no log of the requests (the
        test engine's `batches` would hold every prompt of the run)."""

        def generate(self, requests, **kw):
            if not first:
                first.append(time.perf_counter() - t0)
            return [self._one(r) for r in requests]

    if step == "cascade":
        print(json.dumps(cascade_child(Timed, data, out, t0)))
        return
    s = score_file(AdaptRubric(Timed(), PipelineConfig()), data, out, resume=step != "score", progress=False)
    print(json.dumps({"seconds": time.perf_counter() - t0, "first_call": first[0] if first else None,
                      "this_run": s["this_run"]["n"], **{k: s[k] for k in COUNTS}}))


def cascade_child(engine, data: str, out: str, t0: float) -> dict:
    """The cascade step: `engine` (the scripted one) as student, unsure on one instruction in 5, and as judge."""
    import zlib

    from adaptrubric_local.cascade.scorer import Cascade
    from adaptrubric_local.cli.cascade import run_cascade
    from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
    from adaptrubric_local.run_settings import IN_PROCESS, vars_of

    def unsure(req, digit):
        p = 0.55 if zlib.crc32(req.prompt.encode()) % 5 == 0 else 0.9
        return p if digit == "1" else 1 - p

    student = AdaptRubric(engine(p_score=unsure), PipelineConfig())
    cascade = Cascade(student, AdaptRubric(engine(), PipelineConfig()), BAND, SPOT_CHECK)
    s = run_cascade(cascade, {**vars_of(student), "runtime": dict(IN_PROCESS)}, data, Path(out), progress=False,
                    extra={"cascade": {"band": list(BAND), "spot_check": SPOT_CHECK}})
    c = s["cascade"]
    return {"seconds": time.perf_counter() - t0, "this_run": s["this_run"]["n"], **{k: s[k] for k in COUNTS},
            "trajectories": c["trajectories"], "sent_to_judge": c["sent_to_judge"], "why": c["why"]}


COMMANDS = ("eval", "review", "labels", "calibrate", "apply")


def side(out: str | Path, step: str) -> Path:
    """Where a step over the verdict file `out` writes (and the labels file of `labels`)."""
    n = Path(out).stem.split("-")[-1]
    return Path(out).parent / {"labels": f"labels-{n}.jsonl", "calibrate": f"calib-{n}.json",
                               "apply": f"v-{n}.calibrated.jsonl"}.get(step, step)


def command(step: str, data: str, out: str) -> list[str]:
    """The command line of a step that runs an `adaptrubric` command."""
    if step == "calibrate":
        return ["calibrate", data, "--verdicts", out, "--out", str(side(out, "calibrate"))]
    if step == "apply":
        return ["calibrate", "--apply", str(side(out, "calibrate")), "--verdicts", out, "--out",
                str(side(out, "apply"))]
    extra = {"eval": ["--no-review"], "review": [], "labels": ["--no-review", "--labels", str(side(out, "labels"))]}
    return ["eval", data, "--verdicts", out, "--out", str(Path(out).parent / step), "--quiet", *extra[step]]


def write_labels(path: Path, n: int) -> int:
    """A labels file that flips the label of every tenth trajectory of `build`'s data; returns how many."""
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(0, n, 10):
            fh.write(json.dumps({"id": f"t{i:07d}", "label": 1 - i % 2, "note": "flipped"}) + "\n")
    return len(range(0, n, 10))


def checked(step: str, n: int, out: Path) -> list[str]:
    """What is wrong with the output of labels, calibrate or apply over `build`'s N trajectories."""
    if step == "labels":
        m = json.loads((out.parent / "labels" / "metrics.json").read_text())
        flipped = len(range(0, n, 10))  # even ids: label 0 in the data, 1 in the labels file
        if m["run"]["labels"]["overridden"] != flipped or m["overall"]["positives"] != n // 2 + flipped:
            return [f"{n}: eval --labels counted {m['run']['labels']['overridden']} overridden and "
                    f"{m['overall']['positives']} positives (want {flipped} and {n // 2 + flipped})"]
    elif step == "calibrate":
        cal = json.loads(side(out, "calibrate").read_text())
        if (cal["n"], cal["positives"]) != (n, n // 2):
            return [f"{n}: calibrate fitted on {cal['n']} verdicts ({cal['positives']} positive), want {n} ({n // 2})"]
    elif step == "apply":
        lines = sum(1 for _ in open(side(out, "apply"), "rb"))
        if lines != n:
            return [f"{n}: calibrate --apply wrote {lines} lines for {n}"]
    return []


def measure(step: str, data: Path, out: Path, script: str = __file__) -> dict:
    """Run one step of `script` (`script --child STEP DATA OUT`, this file by default) in a fresh process:
    its result, wall seconds and peak RSS (MB) from wait4."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, script, "--child", step, str(data), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    text = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{step} of {data} failed (exit {proc.returncode})")
    res = json.loads(text.strip().splitlines()[-1])
    return {**res, "wall": wall, "rss_mb": usage.ru_maxrss / 1024}


def cut_tail(path: Path, k: int) -> None:
    """Remove the last `k` lines of `path` (in place, reading only its end)."""
    with open(path, "rb+") as fh:
        fh.seek(0, 2)
        pos, left = fh.tell(), k + 1
        while pos > 0 and left:
            step = min(pos, 1 << 16)
            pos -= step
            fh.seek(pos)
            chunk = fh.read(step)
            for j in range(len(chunk) - 1, -1, -1):
                if chunk[j] == 10:
                    left -= 1
                    if not left:
                        fh.truncate(pos + j + 1)
                        return
        fh.truncate(0)


def run_size(work: Path, n: int, args) -> dict:
    only = args.only.split(",")
    data = work / f"data-{n}.jsonl"
    if "score" in only or not data.exists():
        data = build(work, n, args.steps, args.shots)
    out = work / f"v-{n}.jsonl"
    row, problems = {}, []
    if "score" in only:
        for p in out.parent.glob(f"v-{n}.*"):
            p.unlink()
        row["score"] = measure("score", data, out)
    lines = sum(1 for _ in open(out, "rb")) if out.exists() else 0
    if lines != n or ("score" in row and row["score"]["n"] != n):
        problems.append(f"{n}: {lines} lines for {n} trajectories")
    if "resume" in only:
        row["resume"] = measure("resume", data, out)
        if row["resume"]["this_run"]:
            problems.append(f"{n}: the resume of the finished file scored {row['resume']['this_run']}")
    if "labels" in only:
        write_labels(side(out, "labels"), n)
    for step in COMMANDS:
        if step in only:
            row[step] = measure(step, data, out)
            if row[step].get("rc"):
                problems.append(f"{n}: {step} exited {row[step]['rc']}")
            else:
                problems += checked(step, n, out)
    if "cascade" in only:
        both = work / f"vc-{n}.jsonl"
        for p in both.parent.glob(f"vc-{n}.*"):
            p.unlink()
        row["cascade"] = c = measure("cascade", data, both)
        if c["trajectories"] != n or c["n"] != n or not c["sent_to_judge"]:
            problems.append(f"{n}: the cascade counted {c['trajectories']} of {n}, sent {c['sent_to_judge']} to the "
                            "judge")
    if "first" in only:
        counts = {k: v for k, v in json.loads(out.with_suffix(".summary.json").read_text()).items() if k in COUNTS}
        cut_tail(out, args.cut)
        row["first"] = measure("first", data, out)
        if {k: row["first"][k] for k in COUNTS} != counts:
            problems.append(f"{n}: the cut resume's counts differ from the uncut file's")
        if row["first"]["first_call"] is None:
            problems.append(f"{n}: the cut resume made no engine call")
    row["problems"] = problems
    return row


def report(sizes: list[int], rows: dict[int, dict]) -> list[str]:
    print("| trajectories | step | seconds | ms/traj | peak RSS (MB) | first new call (s) |")
    print("|---|---|---|---|---|---|")
    steps = [s for s in STEPS if s in rows[sizes[0]]]
    for n in sizes:
        for step in steps:
            r = rows[n][step]
            first = f"{r['first_call']:.1f}" if step == "first" and r.get("first_call") is not None else ""
            print(f"| {n:,} | {step} | {r['wall']:.1f} | {1000 * r['wall'] / n:.3f} | {r['rss_mb']:.0f} | {first} |")
    base = next((n for n in sizes if n >= 10000), sizes[0])
    top = sizes[-1]
    problems = []
    print(f"\nfrom {base:,} to {top:,} trajectories ({top / base:g}x the data):")
    for step in steps:
        a, b = rows[base][step], rows[top][step]
        grow = b["rss_mb"] - a["rss_mb"]
        ratio = (b["wall"] / top) / (a["wall"] / base) if a["wall"] else float("nan")
        print(f"  {step:6s} peak RSS {a['rss_mb']:.0f} -> {b['rss_mb']:.0f} MB ({grow:+.0f} MB), "
              f"time per trajectory x{ratio:.2f}")
    for n in sizes:
        problems += rows[n]["problems"]
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated trajectory counts")
    ap.add_argument("--steps", type=int, default=8, help="steps per trajectory (default 8)")
    ap.add_argument("--shots", type=int, default=16, help="screenshots shared by all trajectories (default 16)")
    ap.add_argument("--cut", type=int, default=64, help="lines removed before the timed resume (default 64)")
    ap.add_argument("--work", help="folder for the data and verdicts (default: a temporary one)")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--only", default=",".join(STEPS),
                    help=f"the steps to measure (default all: {','.join(STEPS)}); without score, the verdict files "
                         "of an earlier run in --work")
    ap.add_argument("--child", nargs=3, metavar=("STEP", "DATA", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    sizes = sorted(int(x) for x in args.sizes.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; python eval/stream_scale.py --sizes "
              f"{args.sizes} --steps {args.steps} --shots {args.shots} --only {args.only}")
        rows = {}
        for n in sizes:
            rows[n] = run_size(work, n, args)
            print(f"  {n:,}: done in {sum(rows[n][s]['wall'] for s in STEPS if s in rows[n]):.0f} s",
                  file=sys.stderr)
        problems = report(sizes, rows)
        if args.json:
            Path(args.json).write_text(json.dumps({str(n): rows[n] for n in sizes}, indent=2) + "\n")
    for p in problems:
        print(f"FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
