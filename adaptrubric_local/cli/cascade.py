"""`score --judge-url/--judge-model` (the student answers, the judge checks) and `cascade-fit` (the
escalation band from trajectories scored by both), registered by `cli/`. Argument handling and file
I/O only; the cascade itself is `adaptrubric_local.cascade`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import replace
from pathlib import Path

from ..cascade.config import SPOT_CHECK, CascadeConfig
from ..cascade.live import drifted, watch
from ..cascade.report import cascade_summary, describe
from ..cascade.scorer import Cascade
from ..flags import add_config_arguments, config_kwargs
from ..formats.stream import as_stream, stream_trajectories
from ..pipeline import AdaptRubric
from ..run_settings import IN_PROCESS, sidecar, vars_of
from ..scoring import score_with
from ..types import Trajectory
from ..verdict_file import iter_last_lines
from .common import add_command, checked_settings, make_engine, refuse_given

FIT_EXAMPLES = """examples:
  # score a held-out set with both, then fit the band on it
  adaptrubric score HELDOUT --model STUDENT --judge-url http://judge:8000/v1 --judge-name J --spot-check 1 \\
      --out both.jsonl
  adaptrubric cascade-fit both.jsonl --target-agreement 0.97 --out band.json
  adaptrubric cascade-fit --student student.jsonl --judge judge.jsonl --out band.json   # two verdict files
  adaptrubric score DATA --model STUDENT --judge-url http://judge:8000/v1 --judge-name J --cascade-band band.json \\
      --out v.jsonl
"""


def add_judge_arguments(p: argparse.ArgumentParser, hide_defaults: bool = False) -> None:
    """One flag per CascadeConfig field, on `score` and `serve` (`hide_defaults`: as add_config_arguments's)."""
    add_config_arguments(p.add_argument_group("judge (a cascade: the judge checks what the student is unsure of; "
                                              "docs/student-judge.md)"), CascadeConfig,
                         hide_defaults=hide_defaults)


def cascade_config(args):
    """The CascadeConfig of the flags; None when no judge was given (then no cascade flag may be)."""
    cfg = CascadeConfig(**config_kwargs(args, CascadeConfig))
    if not cfg.enabled:
        refuse_given(args, CascadeConfig, "a judge: --judge-url URL with --judge-name NAME, or --judge-model M")
        return None
    if getattr(args, "ray", False):
        raise ValueError("a judge (--judge-url/--judge-model) cannot be combined with --ray yet")
    return cfg


def score_cascade(args, cfg, ccfg, loaded, **score_kw) -> dict:
    """Score DATA with the student (--model) and the judge into --out; the summary gets `cascade`."""
    out = Path(args.out)
    band = ccfg.band()  # a bad band file stops here
    extra = {"cascade": ccfg.describe()}
    settings = checked_settings(args, cfg, out, args.resume, extra, **score_kw)
    jcfg = replace(cfg, verify_max_new_tokens=ccfg.judge_max_new_tokens) if ccfg.judge_max_new_tokens else cfg
    with contextlib.ExitStack() as stack:  # closes the student, stops the watcher, closes the judge
        judge_engine = ccfg.teacher(cfg.verify_max_new_tokens).build(what="judge")  # an endpoint is asked once, here
        stack.callback(judge_engine.close)
        # the watcher of a --judge-url endpoint, saying on stderr when the judge stops or starts answering
        health = watch(ccfg, judge_engine, lambda text: print(f"adaptrubric: {text}", file=sys.stderr, flush=True),
                       then=" (`score --resume` asks it again about those lines)")
        if health is not None:
            stack.callback(health.stop)
        student_engine = stack.enter_context(contextlib.closing(make_engine(args, cfg)))
        cascade = Cascade(AdaptRubric(student_engine, cfg), AdaptRubric(judge_engine, jcfg), band,
                          ccfg.spot_check, ccfg.spot_check_seed, health=health)
        settings = settings or {**vars_of(cascade.student), "runtime": dict(IN_PROCESS)}
        summary = run_cascade(cascade, settings, args.data, out, loaded, resume=args.resume, fmt=args.format,
                              progress=not args.quiet, extra=extra, **score_kw)
    print(describe(summary["cascade"]), file=sys.stderr)  # and a warning when the spot checks' agreement is low
    ci = summary["cascade"]["spot_checks"]["ci95"]
    if drifted(ci, ccfg.warn_below):
        print(f"WARNING: the student agrees with the judge at most {ci[1]:.2f} (95% upper end) on this data's spot "
              f"checks, below --warn-below {ccfg.warn_below:g}: distil again on this data, or widen the band",
              file=sys.stderr)
    return summary


def run_cascade(cascade, settings: dict, data, out: Path, loaded=None, resume: bool = False, fmt: str = "auto",
                **score_kw) -> dict:
    """Score `data` (`loaded`, else streamed) with `cascade` into `out` (with `resume`, the lines whose judge
    failed asked again first), and add the summary's `cascade` section."""
    out = Path(out)
    if loaded is None:
        loaded = stream_trajectories(data, fmt=fmt)
    retried = rejudge_failed(cascade, out, loaded) if resume else 0
    summary = score_with(cascade, settings, data, out, resume=resume, fmt=fmt, loaded=loaded, **score_kw)
    return add_cascade_section(out, summary, judge_retried_this_run=retried)


def add_cascade_section(out: Path, summary: dict, **more) -> dict:
    """`summary` with the `cascade` section of `out`'s last lines and `more`, written as out's summary sidecar."""
    summary["cascade"] = {**cascade_summary(iter_last_lines(Path(out))), **more}
    sidecar(Path(out), "summary").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def failed_lines(out: Path) -> list[dict]:
    """The last lines of the verdict file `out` whose judge failed, read one line at a time."""
    return [d for d in iter_last_lines(out) if d.get("judge_error")]


def rejudge_failed(cascade, out: Path, loaded) -> int:
    """`--resume`: ask the judge again about the lines whose judge failed, appending their new lines; returns
    how many were asked. Only the failed ids' trajectories are kept as the data streams."""
    failed = failed_lines(out)
    if not failed:
        return 0
    wanted = {str(d["id"]) for d in failed}
    trajs: dict[str, Trajectory] = {}
    for _, x in as_stream(loaded).items(lambda _position, own: own is None or own in wanted):
        if isinstance(x, Trajectory) and str(x.id) in wanted:
            trajs.setdefault(str(x.id), x)
    print(f"resuming: asking the judge again about {len(failed)} line(s) whose judge failed", file=sys.stderr)
    lines = cascade.rejudge(failed, trajs)
    with open(out, "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(v.to_dict(), ensure_ascii=False) + "\n" for v in lines)
    return len(lines)


def cmd_fit(args) -> int:
    from ..cascade.band import fit_band

    if not 0.0 <= args.spot_check <= 1.0:
        raise ValueError(f"--spot-check must be a fraction in [0, 1], got {args.spot_check}")
    if not 0.0 <= args.confidence < 1.0:
        raise ValueError(f"--confidence must be in [0, 1), got {args.confidence}")
    pairs = fit_pairs(args)
    result = fit_band(pairs, args.target_agreement, args.max_judge_share, spot_check=args.spot_check,
                      confidence=args.confidence)
    result["source"] = {"cascade": args.verdicts, "student": args.student, "judge": args.judge}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    if len(pairs) < 100:
        print(f"note: fitted on {len(pairs)} trajectories; a band fitted on fewer than 100 is a rough guess",
              file=sys.stderr)
    if not result["met"]:
        print(f"the target cannot be met: {result['why_not']} (written to {args.out} anyway)", file=sys.stderr)
        return 1
    lo, hi = result["band"]
    print(f"band [{lo:g}, {hi:g}]: agreement {result['agreement']:.3f} with judge-only scoring on {len(pairs)} "
          f"trajectories, sending {result['judge_share']:.1%} of them to the judge (--spot-check {args.spot_check:g} "
          f"included) -> {args.out}", file=sys.stderr)
    return 0


def fit_pairs(args) -> list:
    """(student verdict, judge score) pairs from a cascade file's random spot checks, or from two verdict
    files joined by id (lines where either has no 0/1 score from the judge are left out)."""
    from ..cascade.band import Pair

    def read_last_lines(path: Path) -> dict[str, dict]:
        return {str(d["id"]): d for d in iter_last_lines(path)}

    def pair(s: dict, judge_score) -> Pair:
        return Pair(status=s.get("status", "ok"), score=s.get("score"), p_success=s.get("p_success"),
                    evidence_sufficient=s.get("evidence_sufficient"), judge_score=judge_score)

    if args.verdicts:
        if args.student or args.judge:
            raise ValueError("give a cascade verdict file, or --student and --judge, not both")
        lines = read_last_lines(Path(args.verdicts))
        sample = [d for d in lines.values() if "spot_check" in (d.get("escalated") or [])
                  and (d.get("judge") or {}).get("status") == "ok"]
        if not sample:
            raise ValueError(f"{args.verdicts}: no spot-checked line with a judge verdict (score with --spot-check, "
                             "e.g. --spot-check 1 on a held-out set)")
        return [pair(d["student"], d["judge"]["score"]) for d in sample]
    if not (args.student and args.judge):
        raise ValueError("give a cascade verdict file (VERDICTS), or both --student S.jsonl and --judge J.jsonl")
    student, judge = read_last_lines(Path(args.student)), read_last_lines(Path(args.judge))
    both = [i for i in student if i in judge and judge[i].get("status") == "ok"]
    if not both:
        raise ValueError(f"{args.student} and {args.judge} share no id the judge scored")
    return [pair(student[i], judge[i]["score"]) for i in both]


def add_subcommands(sub) -> None:
    p = add_command(sub, "cascade-fit", cmd_fit, help="fit the band of student p_success that goes to the judge",
        description="From trajectories scored by both the student and the judge (a cascade file's spot checks, or two "
                    "verdict files), fit the narrowest band [LO, HI] of the student's p_success that keeps the "
                    "cascade's agreement with judge-only scoring at or above --target-agreement, and write it for "
                    "`score --cascade-band`. Exit 1 when the target cannot be met within --max-judge-share.",
        epilog=FIT_EXAMPLES)
    p.add_argument("verdicts", nargs="?", metavar="VERDICTS", help="a cascade verdict file (its spot-checked lines)")
    p.add_argument("--student", help="the student's verdict file (with --judge)")
    p.add_argument("--judge", help="the judge's verdict file on the same trajectories (with --student)")
    p.add_argument("--target-agreement", type=float, default=0.97,
                   help="least agreement with judge-only scoring (default 0.97)")
    p.add_argument("--max-judge-share", type=float, default=0.5,
                   help="most of the trajectories the judge may take; beyond half, a cascade saves little "
                        "(default 0.5)")
    p.add_argument("--spot-check", type=float, default=SPOT_CHECK, metavar="F",
                   help="the --spot-check of the `score` runs that will use the band: those random lines go to "
                        f"the judge too, counted in the judge share and the agreement (default {SPOT_CHECK:g})")
    p.add_argument("--confidence", type=float, default=0.95, metavar="C",
                   help="a band qualifies when the lower end of this Wilson interval of its agreement on the fit "
                        "set reaches the target; 0: the fit set's own figure, which new data misses about half "
                        "the time (default 0.95)")
    p.add_argument("--out", required=True, help="the band file to write (BAND.json)")
