"""Scoring a data set with several worker processes (one model copy each, one GPU each when there are
enough), merged into one verdict file with no id missing or duplicated.

Trajectories are sharded by `crc32(id) % world`. Each worker appends verdict lines to its own part
file (`<out>.parts/part-<rank>.jsonl`) and skips every id already in any part file or in `<out>`, so
a killed worker is restarted by the driver (up to `max_restarts`) and resumes where it stopped, and
a killed driver is resumed with `resume=True` (the world size may differ). Workers share nothing
but the file system: no process group, so a restart never hangs in a rendezvous. At the end the
driver merges the parts and any earlier lines of `<out>` (first line per id wins, in data order),
replaces `<out>` atomically and removes the parts.

The same `worker` entry point runs one shard on another node (`--rank R --world W` on a shared file
system), after which `merge` joins the parts: any launcher (SLURM, torchrun, a Ray job) can start
them. Knows nothing about argument parsing of `score` (the lead's cli_score.py calls
`score_distributed`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zlib
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

from .formats import load_trajectories
from .pipeline import PipelineConfig
from .scoring import error_id, repair_torn_tail, sidecar, summarize
from .types import Verdict


def shard_of(traj_id: str, world: int) -> int:
    """The worker that scores this id (stable across runs and machines)."""
    return zlib.crc32(traj_id.encode("utf-8")) % world


def parts_dir(out: Path) -> Path:
    """`verdicts.jsonl` -> `verdicts.parts/`."""
    return out.with_suffix(".parts")


def read_lines(path: Path) -> list[tuple[str, str]]:
    """(id, line) of every complete verdict line; a torn last line (a writer killed mid-line) is ignored."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
    out = []
    for n, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if line.strip():
            try:
                out.append((str(json.loads(line)["id"]), line))
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"{path}: line {n} is not a verdict line") from None
    return out


def done_ids(out: Path) -> set[str]:
    """Ids with a verdict in `out` or in any part file."""
    ids = {i for i, _ in read_lines(out)}
    for p in sorted(parts_dir(out).glob("part-*.jsonl")):
        ids.update(i for i, _ in read_lines(p))
    return ids


# ----------------------------------------------------------------------------- one worker
def run_worker(spec_path: str | Path, rank: int, world: int) -> int:
    """Score shard `rank` of `world` into its part file (resuming it); the spec is the driver's JSON."""
    from .pipeline import AdaptRubric

    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    part = parts_dir(out) / f"part-{rank}.jsonl"
    if part.is_file():
        repair_torn_tail(part)  # our own torn last line (killed mid-write): cut it before appending
    loaded = load_trajectories(spec["data"], fmt=spec.get("fmt", "auto"))
    done = done_ids(out)
    todo = [t for t in loaded.trajectories if shard_of(t.id, world) == rank and t.id not in done]
    if not todo:
        return 0
    engine = _engine(spec["engine"])
    pipe = AdaptRubric(engine, PipelineConfig(**spec["pipeline"]))
    try:
        with open(part, "a", encoding="utf-8") as fh:
            for v in pipe.iter_score(todo):
                fh.write(json.dumps(v.to_dict(), ensure_ascii=False) + "\n")
                fh.flush()
    finally:
        engine.close()
    (parts_dir(out) / f"stats-{rank}.json").write_text(json.dumps(dict(pipe.stats)) + "\n")
    return 0


def _engine(options: dict):
    from .engine.build import build_engine

    return build_engine(**options)


# ----------------------------------------------------------------------------- merge
def merge(data: str | Path, out: str | Path, fmt: str = "auto") -> dict:
    """Join `<out>` and its part files into `<out>` (data order, one line per id), remove the parts.
    Returns {"n", "missing", "duplicates_dropped"}."""
    out = Path(out)
    loaded = load_trajectories(data, fmt=fmt)
    lines: dict[str, str] = {}
    dropped = 0
    sources = [out, *sorted(parts_dir(out).glob("part-*.jsonl"))]
    for src in sources:
        for i, line in read_lines(src):
            if i in lines:
                dropped += 1
            else:
                lines[i] = line
    order = [error_id(e) for e in loaded.errors] + [t.id for t in loaded.trajectories]
    missing = [i for i in order if i not in lines]
    extra = [i for i in lines if i not in set(order)]
    tmp = out.with_suffix(out.suffix + ".merging")
    with open(tmp, "w", encoding="utf-8") as fh:
        for i in order + extra:
            if i in lines:
                fh.write(lines[i] + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, out)  # atomic: a driver killed here leaves either the old or the merged file
    if not missing:
        for p in parts_dir(out).glob("*"):
            p.unlink()
        parts_dir(out).rmdir()
    return {"n": len(order) - len(missing), "missing": len(missing), "duplicates_dropped": dropped}


# ----------------------------------------------------------------------------- the driver
def score_distributed(data: str | Path, out: str | Path, *, workers: int, pipeline: PipelineConfig,
                      engine_options: dict[str, Any], resume: bool = False, fmt: str = "auto",
                      progress: bool = True, max_restarts: int = 2, gpus: Optional[int] = None) -> dict:
    """Score `data` into `out` with `workers` processes; returns the run summary (as `score_file`).

    `engine_options`: HFEngineConfig keyword arguments (model, ...). With at least `workers` GPUs each
    worker sees one (`CUDA_VISIBLE_DEVICES`); on the CPU each gets an equal share of the cores."""
    from tqdm import tqdm

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pdir = parts_dir(out)
    loaded = load_trajectories(data, fmt=fmt)  # fail on bad input before any model loads
    if not resume and ((out.exists() and out.stat().st_size) or any(pdir.glob("part-*.jsonl"))):
        raise ValueError(f"{out} (or {pdir}) exists; pass --resume to continue it or choose another output")
    pdir.mkdir(exist_ok=True)
    done = done_ids(out)
    total = len(loaded.trajectories) + len(loaded.errors)
    spec = {"data": str(Path(data).resolve()), "out": str(out.resolve()), "fmt": fmt,
            "pipeline": asdict(pipeline), "engine": engine_options}
    spec_path = pdir / "spec.json"
    spec_path.write_text(json.dumps(spec, indent=2) + "\n")
    sidecar(out, "config").write_text(json.dumps({**asdict(pipeline), "engine": engine_options, "workers": workers,
                                                  "data": str(data)}, indent=2) + "\n")
    if gpus is None:
        gpus = _gpu_count()
    cores = max(1, (os.cpu_count() or 1) // workers)
    t0 = time.perf_counter()

    def launch(rank: int) -> subprocess.Popen:
        env = dict(os.environ)
        if gpus >= workers:
            env["CUDA_VISIBLE_DEVICES"] = str(rank)
        env.setdefault("OMP_NUM_THREADS", str(cores))
        cmd = [sys.executable, "-m", "adaptrubric_local.distributed", "worker", str(spec_path), "--rank", str(rank),
               "--world", str(workers)]
        proc = subprocess.Popen(cmd, env=env)
        (pdir / f"worker-{rank}.pid").write_text(f"{proc.pid}\n")
        return proc

    procs = {r: launch(r) for r in range(workers)}
    restarts = {r: 0 for r in range(workers)}
    bar = tqdm(total=total, initial=len(done), unit="traj", desc=f"scoring ({workers} workers)",
               disable=not progress, dynamic_ncols=True)
    failed: dict[int, int] = {}
    try:
        while procs:
            time.sleep(0.5)
            bar.n = min(total, len(done_ids(out)))
            bar.refresh()
            for r, p in list(procs.items()):
                rc = p.poll()
                if rc is None:
                    continue
                del procs[r]
                if rc != 0:
                    if restarts[r] < max_restarts:
                        restarts[r] += 1
                        print(f"worker {r} exited with {rc}; restarting it ({restarts[r]}/{max_restarts}), it "
                              "resumes from its part file", file=sys.stderr)
                        procs[r] = launch(r)
                    else:
                        failed[r] = rc
    finally:
        bar.close()
        for p in procs.values():  # the driver is stopping early: do not leave workers behind
            p.terminate()
    if failed:
        raise RuntimeError(f"worker(s) {sorted(failed)} failed {max_restarts + 1} times (exit codes {failed}); "
                           f"finished verdicts are kept in {pdir}: rerun with --resume")
    _write_errors(loaded, out, pipeline, engine_options)
    stats = _worker_stats(pdir)
    merged = merge(data, out, fmt=fmt)
    verdicts = [Verdict.from_dict(json.loads(line)) for _, line in read_lines(out)]
    summary = summarize(verdicts, stats, time.perf_counter() - t0)
    summary.update(model=engine_options.get("model"), ablation=pipeline.ablation, out=str(out), workers=workers,
                   skipped_resume=len(done), restarts=sum(restarts.values()), **merged)
    sidecar(out, "summary").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _write_errors(loaded, out: Path, pipeline: PipelineConfig, engine_options: dict) -> None:
    """Records that could not be loaded get their error lines (once), like single-process scoring."""
    from .bank import load_bank

    model = engine_options.get("model")
    if model and engine_options.get("adapter"):
        model = f"{model}+{engine_options['adapter']}"  # as the engine names itself
    sha = load_bank(pipeline.bank_path).sha
    done = done_ids(out)
    path = parts_dir(out) / "part-errors.jsonl"
    with open(path, "a", encoding="utf-8") as fh:
        for e in loaded.errors:
            if error_id(e) not in done:
                v = Verdict(id=error_id(e), status="error", error=str(e), bank_sha=sha, model=model)
                fh.write(json.dumps(v.to_dict(), ensure_ascii=False) + "\n")


def _worker_stats(pdir: Path) -> dict:
    total: dict[str, float] = {}
    for p in pdir.glob("stats-*.json"):
        for k, v in json.loads(p.read_text()).items():
            total[k] = total.get(k, 0) + v
    return total


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m adaptrubric_local.distributed",
                                 description="Run one scoring shard (`worker`) or join the shards (`merge`).")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="score shard RANK of WORLD into <out>.parts/part-RANK.jsonl")
    w.add_argument("spec", help="the driver's spec.json (data, out, pipeline and engine options)")
    w.add_argument("--rank", type=int, required=True)
    w.add_argument("--world", type=int, required=True)
    m = sub.add_parser("merge", help="join <out> and <out>.parts/ into <out>")
    m.add_argument("data")
    m.add_argument("out")
    m.add_argument("--format", default="auto")
    a = ap.parse_args(argv)
    if a.cmd == "worker":
        return run_worker(a.spec, a.rank, a.world)
    print(json.dumps(merge(a.data, a.out, a.format)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
