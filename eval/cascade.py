#!/usr/bin/env python3
"""The student answers, the judge checks: a real cascade on this machine, side by side with student-only
and judge-only scoring, and the spot-check estimate's 95% interval coverage over seeded repeats.

    python eval/cascade.py --work runs/cascade-eval                    # builds both models (3-8 minutes)
    python eval/cascade.py --judge-model J --student-model S --judge-engine transformers
    python eval/cascade.py --tasks 4 --candidates 2 --repeats 100      # the CI smoke size

The judge is the answering tiny model (`make-tiny-model --answering`, eval/answering_model.py) served
by the real vLLM OpenAI server from .venv-vllm (`--judge-engine vllm`, the default when .venv-vllm
exists) or run in process by the transformers engine (`--judge-engine transformers`). The student is
the same recipe cut short (fewer epochs, another seed, a teacher `--student-teacher-p` sure), so it
still writes unparsed and unsure verdicts. The data is `synth --visible-outcome --size 96x192` with
hard cases: on `--hard` of the trajectories the final banner is only partly its outcome's colour, the
lower 30-70% the other outcome's. Two draws: a fit set (seed 11) on which `cascade-fit` fits
the band (`--target-agreement`, `--max-judge-share 0.25`, the run's `--spot-check`) from the student-only
and judge-only verdict files, and a test set (seed 12) on which the three are run and compared, all by
the command line.

Coverage: over `--repeats` spot-check seeds on the test set's fixed student and judge verdicts, how
often the 95% Wilson interval of the spot checks contains the student's true agreement with the judge,
and how often the cascade's estimated-agreement interval contains the cascade's true agreement.
Exits 1 when a line is lost, when the cascade's judge-decided lines differ from judge-only scoring, or
when the coverage runs fail to compute; a target not met is printed with its figures, not a failure.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adaptrubric_local.audit.report import wilson  # noqa: E402
from adaptrubric_local.cascade.config import DEFAULT_BAND, SPOT_CHECK  # noqa: E402
from adaptrubric_local.cascade.report import estimate  # noqa: E402
from adaptrubric_local.cascade.scorer import escalation  # noqa: E402
from adaptrubric_local.synth import synthesize  # noqa: E402
from adaptrubric_local.types import Verdict  # noqa: E402

VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"
METHOD = ["--router", "rules", "--no-fine", "--verify-max-new-tokens", "24"]


def cli(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    """`adaptrubric ARGS` in its own process: (wall seconds, the process)."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "adaptrubric_local.cli", *args], capture_output=True, text=True)
    return time.perf_counter() - t0, p


def must(args: list[str]) -> float:
    wall, p = cli(*args)
    if p.returncode != 0:
        raise SystemExit(f"adaptrubric {' '.join(args[:2])} ... failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    return wall


def build(out: Path, seed: int, epochs: float, teacher_p: float) -> Path:
    if (out / "answering.json").is_file():
        return out
    code = ("import sys; from adaptrubric_local.distill.answering import AnsweringSettings, answering_model; "
            f"answering_model(sys.argv[1], AnsweringSettings(seed={seed}, epochs={epochs}, teacher_p={teacher_p}))")
    p = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    if p.returncode != 0:
        raise SystemExit(f"building {out} failed:\n{p.stderr[-3000:]}")
    return out


def draw(out: Path, seed: int, tasks: int, candidates: int, hard: float) -> tuple[Path, int]:
    """A synth --visible-outcome set with hard cases: on `hard` of its trajectories the final screen's
    banner is only partly its outcome's colour, the rest (a random 30-70% from the bottom) the other
    outcome's, so what the screen says is unclear."""
    from PIL import Image, ImageDraw

    data = synthesize(out, n_tasks=tasks, candidates=candidates, size=(96, 192), seed=seed, visible_outcome=True)
    recs = [json.loads(x) for x in data.read_text().splitlines() if x.strip()]
    rng = random.Random(seed)
    n_hard = 0
    for r in recs:
        if rng.random() >= hard:
            continue
        n_hard += 1
        final = out / r["steps"][-1]["screenshot"]
        im = Image.open(final).convert("RGB")
        w, h = im.size
        other = (200, 40, 40) if r.get("label") == 1 else (40, 170, 70)
        ImageDraw.Draw(im).rectangle([0, int(h * (1 - rng.uniform(0.3, 0.7))), w, h], fill=other)
        copy = final.with_name(final.stem + "-hard.png")
        im.save(copy)
        r["steps"][-1]["screenshot"] = str(copy.relative_to(out))
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return data, n_hard


class VllmJudge:
    """The judge on the real vLLM OpenAI server (127.0.0.1, its own process group)."""

    def __init__(self, model: Path, log: Path, timeout: float = 900.0):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        cmd = [str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name",
               "judge", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len", "4096",
               "--enforce-eager", "--max-logprobs", "20", "--limit-mm-per-prompt", '{"image": 10}']
        self.fh = open(log, "wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=self.fh, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
        while time.perf_counter() - t0 < timeout and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    self.start_s = time.perf_counter() - t0
                    return
            except OSError:
                time.sleep(1.0)
        self.stop()
        raise SystemExit(f"the vLLM server did not start; see {log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.fh.close()


def lines(path: Path) -> dict[str, dict]:
    out = {}
    for x in path.read_text().splitlines():
        if x.strip():
            d = json.loads(x)
            out[str(d["id"])] = d
    return out


def agreement(a: dict[str, dict], j: dict[str, dict]) -> tuple[int, int]:
    """(agree, n) of verdicts `a` with judge-only `j` over the ids the judge scored (an unparsed one disagrees)."""
    ids = [i for i in j if j[i]["status"] == "ok"]
    return sum(a[i]["status"] == "ok" and a[i]["score"] == j[i]["score"] for i in ids), len(ids)


def coverage(s: dict, j: dict, band, fraction: float, repeats: int) -> dict:
    """Over `repeats` spot-check seeds on fixed verdicts: how often the student's spot-check interval holds
    its true agreement, and the cascade's estimate's interval the cascade's true agreement."""
    ids = [i for i in j if j[i]["status"] == "ok"]
    truth_s = sum(s[i]["status"] == "ok" and s[i]["score"] == j[i]["score"] for i in ids) / len(ids)
    hit_s = hit_c = runs_s = runs_c = 0
    sizes, widths = [], []
    for seed in range(repeats):
        why = {i: escalation(Verdict.from_dict(s[i]), band, fraction, seed) for i in ids}
        spot = [i for i in ids if "spot_check" in why[i]]
        agree = [s[i]["status"] == "ok" and s[i]["score"] == j[i]["score"] for i in spot]
        ci = wilson(sum(agree), len(agree))
        if ci is not None:
            runs_s += 1
            hit_s += ci[0] <= truth_s <= ci[1]
            sizes.append(len(agree))
            widths.append(ci[1] - ci[0])
        student_ids = [i for i in ids if not why[i]]
        true_c = (len(ids) - len(student_ids) + sum(s[i]["score"] == j[i]["score"] for i in student_ids)) / len(ids)
        only = [s[i]["score"] == j[i]["score"] for i in spot if why[i] == ["spot_check"]]
        est = estimate(len(ids), len(student_ids), only)
        if est and est.get("ci95"):
            runs_c += 1
            hit_c += est["ci95"][0] - 1e-12 <= true_c <= est["ci95"][1] + 1e-12
    return {"truth_student": truth_s, "runs_student": runs_s, "covered_student": hit_s, "runs_cascade": runs_c,
            "covered_cascade": hit_c, "mean_sample": sum(sizes) / max(1, len(sizes)),
            "mean_width": sum(widths) / max(1, len(widths))}


def _r(x):
    """Rounded for printing (a number or a list of them)."""
    if isinstance(x, list):
        return [_r(v) for v in x]
    return round(x, 3) if isinstance(x, float) else x


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--work", help="keep the files here (default: a temporary folder)")
    ap.add_argument("--judge-model", help="an answering model folder (default: build one, seed 0, 8 epochs)")
    ap.add_argument("--student-model", help="a student folder (default: build one, seed 1, --student-epochs)")
    ap.add_argument("--student-epochs", type=float, default=6.0, help="the student's epochs (default 6, judge 8)")
    ap.add_argument("--student-teacher-p", type=float, default=0.95,
                    help="how sure the labels the student learns from are (default 0.95)")
    ap.add_argument("--judge-engine", choices=["auto", "vllm", "transformers"], default="auto",
                    help="vllm: the judge on the vLLM OpenAI server of .venv-vllm; auto: vllm when it exists")
    ap.add_argument("--tasks", type=int, default=48, help="synth --tasks per draw (default 48)")
    ap.add_argument("--candidates", type=int, default=4, help="synth --candidates (default 4)")
    ap.add_argument("--hard", type=float, default=0.25, help="share of trajectories with a covered banner")
    ap.add_argument("--target-agreement", type=float, default=0.97)
    ap.add_argument("--max-judge-share", type=float, default=0.25)
    ap.add_argument("--spot-check", type=float, default=SPOT_CHECK,
                    help=f"the cascade's spot-check fraction, in the fit too (default {SPOT_CHECK:g}, score's)")
    ap.add_argument("--repeats", type=int, default=200, help="spot-check seeds for the coverage (default 200)")
    args = ap.parse_args()
    engine = args.judge_engine if args.judge_engine != "auto" else ("vllm" if VLLM_PY.exists() else "transformers")
    with tempfile.TemporaryDirectory(prefix="cascade_eval_") as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        judge = Path(args.judge_model) if args.judge_model else build(work / "judge", 0, 8.0, 0.8)
        student = Path(args.student_model) if args.student_model else build(
            work / "student", 1, args.student_epochs, args.student_teacher_p)
        print(f"models: judge {judge}, student {student} ({time.perf_counter() - t0:.0f} s)", flush=True)
        sets = {name: draw(work / name, seed, args.tasks, args.candidates, args.hard)
                for name, seed in (("fit", 11), ("test", 12))}
        print(f"data: synth --visible-outcome --size 96x192 --tasks {args.tasks} --candidates {args.candidates}, "
              f"seeds 11 (fit) and 12 (test); hard cases {sets['fit'][1]} and {sets['test'][1]}", flush=True)
        server = VllmJudge(judge, work / "vllm.log") if engine == "vllm" else None
        try:
            return run(args, work, engine, server, judge, student, sets)
        finally:
            if server is not None:
                server.stop()


def fit_on(args, work: Path, confidence: float) -> dict:
    """`cascade-fit` on the fit set's two verdict files at `confidence` (0: the fit set's own figure):
    the band file's content, also written to band-<confidence>.json."""
    band_file = work / f"band-{confidence:g}.json"
    _, p = cli("cascade-fit", "--student", str(work / "student-fit.jsonl"), "--judge", str(work / "judge-fit.jsonl"),
               "--target-agreement", str(args.target_agreement), "--max-judge-share", str(args.max_judge_share),
               "--spot-check", str(args.spot_check), "--confidence", str(confidence), "--out", str(band_file))
    if p.returncode not in (0, 1):
        raise SystemExit(f"cascade-fit failed:\n{p.stderr[-2000:]}")
    fit = json.loads(band_file.read_text())
    (lo, hi), (tlo, thi) = fit["band"], fit.get("tight_band", fit["band"])
    print(f"band fitted on the fit set at --confidence {confidence:g}: [{lo:.3f}, {hi:.3f}], widened from "
          f"[{tlo:.3f}, {thi:.3f}] (target {args.target_agreement:g}, --spot-check {args.spot_check:g}, met: "
          f"{fit['met']}; on the fit set agreement {fit['agreement'] or 0:.3f}, its interval's lower end "
          f"{fit.get('agreement_lower') or 0:.3f}, judge share {fit['judge_share'] or 0:.3f})"
          + (f"; {fit['why_not']}" if not fit["met"] else ""))
    return fit


def run(args, work: Path, engine: str, server, judge: Path, student: Path, sets: dict) -> int:
    as_judge = ["--openai-url", server.url, "--model", "judge"] if server else ["--model", str(judge)]
    cascade_judge = (["--judge-url", server.url, "--judge-name", "judge"] if server else ["--judge-model", str(judge)])
    if server:
        print(f"judge: the vLLM OpenAI server of .venv-vllm at {server.url} (ready in {server.start_s:.0f} s)")
    else:
        print("judge: the transformers engine in process (no .venv-vllm here, or --judge-engine transformers)")
    walls = {}
    for name, (data, _) in sets.items():
        walls[f"judge-{name}"] = must(["score", str(data), *as_judge, *METHOD, "--out",
                                       str(work / f"judge-{name}.jsonl"), "--quiet"])
        walls[f"student-{name}"] = must(["score", str(data), "--model", str(student), *METHOD, "--out",
                                         str(work / f"student-{name}.jsonl"), "--quiet"])
    fits = {conf: fit_on(args, work, conf) for conf in (0.95, 0.0)}
    fit = fits[0.95]
    runs = {}
    for name, band in (("cascade", work / "band-0.95.json"), ("point", work / "band-0.json"), ("default", None)):
        out = work / f"cascade-{name}.jsonl"
        walls[name] = must(["score", str(sets["test"][0]), "--model", str(student), *cascade_judge, *METHOD,
                            *(["--cascade-band", str(band)] if band else []), "--spot-check", str(args.spot_check),
                            "--out", str(out), "--quiet"])
        runs[name] = (lines(out), json.loads(out.with_suffix(".summary.json").read_text())["cascade"])
    s, j = lines(work / "student-test.jsonl"), lines(work / "judge-test.jsonl")
    summary = runs["cascade"][1]
    failed = []
    for got, _ in runs.values():
        if set(got) != set(j):
            failed.append(f"a cascade wrote {len(got)} lines for {len(j)} trajectories")
    differ = [i for got, _ in runs.values() for i, d in got.items() if d["decided_by"] == "judge"
              and d["score"] != j[i].get("score")]
    if differ:
        failed.append(f"{len(differ)} judge-decided line(s) differ from judge-only scoring: {differ[:5]}")
    n = len(j)
    jcalls = sum(d["cost_calls"] for d in j.values())
    rows = [("student only", agreement(s, j), 0, 0.0, walls["student-test"]),
            ("judge only", agreement(j, j), n, jcalls, walls["judge-test"]),
            *((f"cascade {label} [{fits[conf]['band'][0]:.2f}, {fits[conf]['band'][1]:.2f}]",
               agreement(runs[name][0], j), runs[name][1]["sent_to_judge"], runs[name][1]["judge_calls"], walls[name])
              for name, conf, label in (("cascade", 0.95, "fitted, 95%"), ("point", 0.0, "fitted, own figure"))),
            (f"cascade default {list(DEFAULT_BAND)}", agreement(runs["default"][0], j),
             runs["default"][1]["sent_to_judge"], runs["default"][1]["judge_calls"], walls["default"])]
    print(f"\ntest set, {n} trajectories ({sets['test'][1]} hard); agreement with judge-only scoring:")
    print(f"{'':<40}{'agreement':>16}{'to judge':>10}{'judge calls':>13}{'wall s':>9}")
    for name, (k, m), sent, calls, wall in rows:
        print(f"{name:<40}{f'{k}/{m} = {k / max(1, m):.3f}':>16}{sent:>10}{calls:>13.1f}{wall:>9.1f}")
    k, m = rows[2][1]
    share = summary["sent_to_judge"] / max(1, n)
    est = summary["cascade_agreement_est"] or {}
    print(f"cascade: {share:.1%} of trajectories to the judge ({summary['why']}), judge calls "
          f"{summary['judge_calls']:.0f} vs {jcalls:.0f} judge-only ({summary['judge_calls'] / max(1, jcalls):.2f}x); "
          f"its own estimate {_r(est.get('agreement'))} (95% {_r(est.get('ci95'))}) from {est.get('n_sample', 0)} spot "
          "checks")
    goal = k / max(1, m) >= args.target_agreement and share <= args.max_judge_share
    print(f"target met: agreement {k / max(1, m):.3f} >= {args.target_agreement:g} "
          f"sending {share:.1%} <= {args.max_judge_share:.0%}"
          if goal else f"target NOT met on this data: agreement {k / max(1, m):.3f} (need {args.target_agreement:g}) "
          f"sending {share:.1%} (at most {args.max_judge_share:.0%}); the student-only agreement is "
          f"{rows[0][1][0] / max(1, rows[0][1][1]):.3f} and {fit.get('always_sent_share', 0):.1%} of the fit set goes "
          "to the judge whatever the band (unparsed or EVIDENCE_SUFFICIENT: no)")
    cov = coverage(s, j, tuple(fit["band"]), args.spot_check, args.repeats)
    if not cov["runs_student"]:
        failed.append("no spot-check seed drew a sample: raise --spot-check or the data size")
    else:
        print(f"spot-check interval coverage over {args.repeats} seeds (--spot-check {args.spot_check:g}, mean sample "
              f"{cov['mean_sample']:.1f}, mean width {cov['mean_width']:.2f}): the student's true agreement "
              f"{cov['truth_student']:.3f} inside the 95% interval {cov['covered_student']}/{cov['runs_student']} = "
              f"{cov['covered_student'] / cov['runs_student']:.3f}; the cascade's true agreement inside its estimate's "
              f"interval {cov['covered_cascade']}/{cov['runs_cascade']} = "
              f"{cov['covered_cascade'] / max(1, cov['runs_cascade']):.3f}")
    if failed:
        print("CHECK FAILED: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
