"""Scoring a data set into a verdict file: streaming lines as they complete, resuming after a crash,
recording bad records as error lines under their own ids, and writing the run's config and summary
beside it (`<out>.config.json`, `<out>.summary.json`). `score_with` is the one writer, for any scorer
that yields verdicts (the in-process pipeline, Ray's replicas), under run_settings.py's settings record.
Knows nothing about argument parsing or where the scorer runs.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from .formats import LoadResult
from .formats.stream import Shard, as_stream, stream_trajectories
from .pipeline import AdaptRubric
from .run_settings import IN_PROCESS, check_fresh, check_resume, file_meta, sidecar, vars_of
from .schema import json_lines
from .stopping import Stopped, stop_reason
from .types import Trajectory, Verdict
from .verdict_file import FileState, Tally


class Scorer(Protocol):
    """What `score_with` needs of a scorer: `AdaptRubric` is one, `ray_scoring.ReplicaPool` another."""

    def iter_score(self, trajs: list[Trajectory]) -> Iterator[Verdict]:
        """One verdict per trajectory, in any order."""

    def summary(self) -> dict:
        """At least `route_unparsed` and `cue_unparsed` so far; `engine` and `runtime` when known."""


def error_id(e) -> str:
    """The id of a record that could not be loaded: its own id when it has one, else its location."""
    own = getattr(e, "record_id", None)
    return str(own) if own else f"{Path(e.file).name}:{e.record}" if e.record else Path(e.file).name


def score_file(pipe: AdaptRubric, data: str | Path, out: str | Path, resume: bool = False, fmt: str = "auto",
               loaded: LoadResult | None = None, progress: bool = True, extra: dict | None = None,
               retry_errors: bool = True, force_settings: bool = False,
               calibration: str | Path | None = None, shard: Shard | None = None) -> dict:
    """Score every trajectory of `data` (of `shard`, when given) into `out` in this process; returns the
    summary. With `calibration` (a file from `adaptrubric calibrate`), each line also gets
    `p_success_calibrated` and the config sidecar records the file's hash."""
    return score_with(pipe, {**vars_of(pipe), "runtime": dict(IN_PROCESS)}, data, out, resume=resume, fmt=fmt,
                      loaded=loaded, progress=progress, extra=extra, retry_errors=retry_errors,
                      force_settings=force_settings, calibration=calibration, shard=shard)


def score_with(scorer: Scorer, settings: dict, data: str | Path, out: str | Path, resume: bool = False,
               fmt: str = "auto", loaded=None, progress: bool = True,
               extra: dict | None = None, retry_errors: bool = True, force_settings: bool = False,
               calibration: str | Path | None = None, desc: str = "scoring",
               shard: Shard | None = None) -> dict:
    """The one writer of verdict files: score what `out` lacks of `data` (of `shard`) with `scorer` (whose
    `run_settings` are `settings`), appending each verdict line as it arrives; returns the summary.
    `loaded` is a LoadResult or a stream; without it `data` is streamed, so memory does not grow with the
    data. Nothing is scored when nothing is left to do. A run stopped by a signal or an exception writes
    the summary of what it did (`stopped`) before the stop goes on (a `stopping.Stopped` gets a `note`)."""
    from tqdm import tqdm

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stream = as_stream(loaded) if loaded is not None else stream_trajectories(data, fmt=fmt)
    for w in stream.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not resume:
        check_fresh(out)
    meta, cal = file_meta(settings, data, {**(extra or {}), **({"shard": str(shard)} if shard else {})}, calibration)
    if resume:
        meta = check_resume(out, meta, force_settings)
    state = FileState.scan(out) if resume else FileState()
    previous = None  # the summary of what the file held before this run (none when a run was killed before it)
    if state:
        with contextlib.suppress(OSError, ValueError):
            previous = json.loads(sidecar(out, "summary").read_text())
    done_keys = state.ids.without(state.errors) if retry_errors else state.ids.keys
    n_todo = stream.count(shard, done_keys)
    n_done = (stream.count(shard) - n_todo) if state else 0
    retried = sum(1 for i in state.errors if i in stream.ids) if retry_errors else 0
    sidecar(out, "config").write_text(json.dumps(meta, indent=2) + "\n")
    if state:
        print(f"resuming: {len(done_keys)} id(s) already in {out}, {n_todo} to do"
              + (f" ({retried} error line(s) retried)" if retried else ""), file=sys.stderr)
    run_tally, whole = Tally(), state.tally
    t0 = time.perf_counter()
    before = scorer.summary()
    model, bank_sha = settings.get("model"), settings.get("bank_sha")
    errors = ErrorReport(out)
    with open(out, "a", encoding="utf-8") as fh:
        bar = tqdm(total=n_todo, unit="traj", desc=desc, disable=not progress, dynamic_ncols=True)

        def write(v: Verdict, problem: str | None = None, on_bar: bool = True) -> None:
            if cal is not None:
                v = replace(v, p_success_calibrated=cal.apply(v.p_success))
            if v.status == "error":
                errors.add(v, problem, bar=bar if on_bar else None)
            old = state.errors.get(str(v.id))  # the id's last line, an error
            if old is not None:
                whole.remove(old)
            whole.add(v)
            run_tally.add(v)
            if old is None or v.status != "error" or old["error"] != v.error:  # not an error repeated word for word
                fh.write(json.dumps(v.to_dict(), ensure_ascii=False) + "\n")
                fh.flush()

        def keep(position: int, own: str | None) -> bool:
            return (shard is None or shard.takes(position)) and (own is None or not state.done(own, retry_errors))

        def trajectories() -> Iterator[Trajectory]:  # bad records written as they come, the rest to the scorer
            for _, x in stream.items(keep):
                if isinstance(x, Trajectory):
                    if not state.done(x.id, retry_errors):
                        yield x
                elif not state.done(error_id(x), retry_errors):
                    write(Verdict(id=error_id(x), status="error", error=str(x), bank_sha=bank_sha, model=model),
                              x.problem, on_bar=False)
                    bar.update(1)

        if progress and hasattr(scorer, "on_stage"):  # the pipeline names what runs: routing, cues, verifying
            scorer.on_stage = lambda what: bar.set_description_str(f"{desc} ({what} of {n_todo})")
        counts: Counter = Counter()
        stopped: BaseException | None = None
        try:
            for ready in (_ready_lists(scorer, trajectories()) if n_todo else ()):
                for v in ready:
                    write(v)
                    counts[v.status] += 1
                bar.update(len(ready))
                bar.set_postfix(unparsed=counts["unparsed"], errors=counts["error"])  # refreshes: shown as it happens
        except BaseException as exc:  # a signal (stopping.Stopped) or a crash: the summary of what was done, then on
            stopped = exc
        bar.close()
    if hasattr(scorer, "on_stage"):
        scorer.on_stage = None
    errors.close()
    try:
        after = scorer.summary()
    except Exception:
        if stopped is None:
            raise
        after = before  # a stopped scorer that cannot give its summary
    unparsed = {k: after.get(f"{k}_unparsed", 0) - before.get(f"{k}_unparsed", 0) for k in ("route", "cue")}
    run = run_tally.summary(unparsed, time.perf_counter() - t0)
    run.update(skipped_resume=n_done, retried_errors=retried, errors_by_kind=dict(errors.kinds))
    summary = _whole(whole, run, previous)
    summary.update(model=model, bank_sha=bank_sha, ablation=settings.get("ablation"), out=str(out),
                   skipped_resume=n_done, retried_errors=retried)
    if shard is not None:
        summary["shard"] = run["shard"] = str(shard)
    summary.update({k: after[k] for k in ("engine", "runtime") if after.get(k)})
    if stopped is not None:
        left = max(0, n_todo - run_tally.n)
        run["stopped"] = summary["stopped"] = {"by": stop_reason(stopped), "left": left}
        if isinstance(stopped, Stopped):
            stopped.note = (f"{run_tally.n} verdict line(s) written to {out} by this run, {left} trajectory(ies) "
                            f"left (summary in {sidecar(out, 'summary')})")
    sidecar(out, "summary").write_text(json.dumps(summary, indent=2) + "\n")
    if stopped is not None:
        raise stopped
    return summary


def _whole(whole: Tally, run: dict, previous: dict | None) -> dict:
    """The summary of the verdict file's last line per id after this run, with `run` (this run's own)
    under `this_run`; seconds add up over the runs whose summary was written (`previous`), so `s_per_traj`
    is their time per answered verdict."""
    prev = previous or {}
    seconds = run["seconds"] + prev.get("seconds", 0.0)
    timed = run["timed_trajectories"] + prev.get("timed_trajectories", 0)
    out = whole.summary({k: run[f"{k}_unparsed"] + prev.get(f"{k}_unparsed", 0) for k in ("route", "cue")}, seconds)
    out.update(s_per_traj=seconds / max(1, timed), seconds=seconds, timed_trajectories=timed, this_run=run)
    return out


def error_kind(problem: str) -> str:
    """A short name for what went wrong, to count error lines by kind: the problem's first clause
    without the paths, quoted values and numbers that differ from one record to the next."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\S*[/\\]\S*", "", problem).lstrip(" :")
    text = re.split(r"[:;(]", text, maxsplit=1)[0]
    return re.sub(r"\d+", "N", " ".join(text.split())).strip(" ,.") or "error"


class ErrorReport:
    """Says why each record of a run failed, once, as its error line is written (file, record and
    field are in the error text), and closes with a count by kind."""

    def __init__(self, out: Path):
        self.out, self.kinds = out, Counter()

    def add(self, v: Verdict, problem: str | None = None, bar=None) -> None:
        """Report one error verdict; `problem`: the error without its file/record prefix, when known."""
        if problem is None:  # the pipeline's errors read "<file>, record <id>: <problem>"
            text = v.error or "error"
            problem = text.split(f", record {v.id}: ", 1)[-1]
        self.kinds[error_kind(problem)] += 1
        (print if bar is None else bar.write)(f"error: {v.error}", file=sys.stderr)

    def close(self) -> None:
        """The closing count, when there were errors."""
        if self.kinds:
            total = sum(self.kinds.values())
            parts = ", ".join(f"{n} {kind}" for kind, n in self.kinds.most_common())
            print(f"{total} record(s) failed in this run: {parts} (their error lines in {self.out} name the file, "
                  "record and field; --resume with the same flags scores them again once the data is fixed; a fix by a "
                  "flag that changes what the verifier sees, such as --max-model-len or --max-visual-tokens, also "
                  "needs --force-settings, recorded in the config sidecar)", file=sys.stderr)


def _ready_lists(scorer: Scorer, trajs: Iterable[Trajectory]) -> Iterator[list[Verdict]]:
    """The scorer's verdicts in the lists they become ready in (`iter_ready`: the pipeline, which takes
    the trajectories batch by batch as it goes), else one at a time from `iter_score` (Ray's pool, which
    splits a list it holds into chunks)."""
    if hasattr(scorer, "iter_ready"):
        yield from scorer.iter_ready(trajs)
    else:
        yield from ([v] for v in scorer.iter_score(list(trajs)))


def calibrate_file(src: str | Path, dest: str | Path, calibration: str | Path) -> int:
    """Copy a verdict file with `p_success_calibrated` set on every line (src may equal dest), and its
    config sidecar with the calibration's provenance; returns the number of lines written."""
    from .evaluation import calibration as calibrations

    cal, prov = calibrations.load(calibration)
    src, dest = Path(src), Path(dest)
    tmp = dest.with_name(dest.name + ".tmp")
    n = 0
    with open(src, encoding="utf-8") as fh, open(tmp, "w", encoding="utf-8") as out:
        for k, d in json_lines(fh, src):
            if not isinstance(d, dict):
                raise ValueError(f"{src}: line {k}: not a verdict line")
            p = d.get("p_success")
            d["p_success_calibrated"] = cal.apply(p) if isinstance(p, (int, float)) else None
            out.write(json.dumps(d, ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, dest)
    cfg = sidecar(src, "config")
    meta = json.loads(cfg.read_text()) if cfg.is_file() else {}
    sidecar(dest, "config").write_text(json.dumps({**meta, **calibrations.provenance(prov)}, indent=2) + "\n")
    if sidecar(src, "summary").is_file() and src != dest:
        sidecar(dest, "summary").write_text(sidecar(src, "summary").read_text())
    return n
