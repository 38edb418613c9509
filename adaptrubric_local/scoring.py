"""Scoring a data set into a verdict file: streaming lines as they complete, resuming after a
crash, recording bad records as error lines, and writing the run's config and summary beside it
(`<out>.config.json`, `<out>.summary.json`). Used by `adaptrubric score`, `eval --model` and
`ablate`. Knows nothing about argument parsing.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

from . import __version__
from .formats import LoadResult, load_trajectories
from .pipeline import AdaptRubric
from .types import Verdict


def sidecar(out: Path, kind: str) -> Path:
    """`verdicts.jsonl` -> `verdicts.<kind>.json`."""
    return out.with_suffix(f".{kind}.json")


def read_done_ids(path: Path) -> set[str]:
    """Ids already in a verdict file; a torn last line (killed mid-write) is cut off."""
    if not path.is_file():
        return set()
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as fh:
            fh.truncate(cut)
        data = data[:cut]
    done = set()
    for n, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if line.strip():
            try:
                done.add(str(json.loads(line)["id"]))
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"{path}: line {n} is not a verdict line; cannot resume into it") from None
    return done


def summarize(verdicts: list[Verdict], stats: dict, seconds: float) -> dict:
    """The run summary printed at the end and written beside the verdicts."""
    n = len(verdicts)
    denom = max(1, stats.get("trajectories", 0))
    return {
        "n": n,
        "scored": sum(v.status == "ok" for v in verdicts),
        "unparsed": sum(v.status == "unparsed" for v in verdicts),
        "errors": sum(v.status == "error" for v in verdicts),
        "positives": sum(v.score == 1 for v in verdicts),
        "s_per_traj": seconds / max(1, n),
        "calls_per_traj": stats.get("calls", 0) / denom,
        "tokens_per_traj": (stats.get("prompt_tokens", 0) + stats.get("completion_tokens", 0)) / denom,
        "route_unparsed": stats.get("route_unparsed", 0),
        "cue_unparsed": stats.get("cue_unparsed", 0),
    }


def error_id(e) -> str:
    """A stable id for a record that could not be loaded."""
    return f"{Path(e.file).name}:{e.record}" if e.record else Path(e.file).name


def score_file(pipe: AdaptRubric, data: str | Path, out: str | Path, resume: bool = False, fmt: str = "auto",
               loaded: Optional[LoadResult] = None, progress: bool = True, extra: Optional[dict] = None) -> dict:
    """Score every trajectory of `data` into `out`; returns the summary."""
    from tqdm import tqdm

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    loaded = loaded or load_trajectories(data, fmt=fmt)
    for w in loaded.warnings:
        print(f"warning: {w}", file=sys.stderr)
    done = read_done_ids(out) if resume else set()
    if not resume and out.exists() and out.stat().st_size:
        raise ValueError(f"{out} exists; pass --resume to continue it or choose another output")
    todo = [t for t in loaded.trajectories if t.id not in done]
    bad = [e for e in loaded.errors if error_id(e) not in done]
    meta = {**vars_of(pipe), "data": str(data), **(extra or {})}
    sidecar(out, "config").write_text(json.dumps(meta, indent=2) + "\n")
    if done:
        print(f"resuming: {len(done)} id(s) already in {out}, {len(todo)} to score", file=sys.stderr)
    verdicts: list[Verdict] = []
    t0 = time.perf_counter()
    model = getattr(pipe.engine, "name", None)
    with open(out, "a", encoding="utf-8") as fh:
        for e in bad:
            _write(fh, Verdict(id=error_id(e), status="error", error=str(e), bank_sha=pipe.bank.sha, model=model),
                   verdicts)
        bar = tqdm(total=len(todo), unit="traj", desc="scoring", disable=not progress, dynamic_ncols=True)
        for v in pipe.iter_score(todo):
            _write(fh, v, verdicts)
            bar.update(1)
            bar.set_postfix(unparsed=sum(x.status == "unparsed" for x in verdicts),
                            errors=sum(x.status == "error" for x in verdicts))
        bar.close()
    summary = summarize(verdicts, dict(pipe.stats), time.perf_counter() - t0)
    summary.update(model=model, bank_sha=pipe.bank.sha, ablation=pipe.config.ablation, out=str(out),
                   skipped_resume=len(done))
    sidecar(out, "summary").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def vars_of(pipe: AdaptRubric) -> dict:
    """What produced a verdict file: pipeline settings, model, adapter, bank hash, version."""
    from dataclasses import asdict

    from dataclasses import is_dataclass

    eng = pipe.engine
    ecfg = getattr(eng, "config", None)
    return {**asdict(pipe.config), "ablation": pipe.config.ablation, "model": getattr(eng, "name", None),
            "adapter": getattr(ecfg, "adapter", None), "max_visual_tokens": getattr(ecfg, "max_visual_tokens", None),
            "engine": asdict(ecfg) if is_dataclass(ecfg) else None, "bank_sha": pipe.bank.sha,
            "package_version": __version__}


def _write(fh, v: Verdict, sink: list) -> None:
    fh.write(json.dumps(v.to_dict(), ensure_ascii=False) + "\n")
    fh.flush()
    sink.append(v)
