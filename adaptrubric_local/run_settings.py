"""The settings record of a verdict file and the resume check: what a run was scored with
(`run_settings`, from the configs alone, or `vars_of` a loaded pipeline), its `<out>.config.json`
sidecar, which settings decide verdicts (everything but `RUNTIME_ONLY`), and whether `--resume` may
continue a file with new settings (`check_resume`, `precheck_out` before a model loads). Knows nothing
about writing verdict lines (scoring.py) or where the scorer runs.
"""
from __future__ import annotations

import datetime
import functools
import hashlib
import json
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from ._version import __version__
from .pipeline import AdaptRubric, PipelineConfig

# settings that change how fast a run goes, never what the verifier sees or says; `runtime` is how the
# run was executed (in-process, or Ray with its replicas)
RUNTIME_ONLY = {"trajectories_per_batch", "max_batch_size", "max_batch_tokens", "image_workers", "device_map",
                "attn_implementation", "compile", "package_version", "data", "data_fingerprint", "runtime",
                "calibration_path", "concurrency", "timeout", "max_retries", "api_key_env",  # these: a server's
                # vLLM's memory, scheduling and compilation settings, and how an adapter is applied (LoRA or merged)
                "gpu_memory_utilization", "max_num_seqs", "enforce_eager", "limit_mm_per_prompt",
                "enable_prefix_caching", "kv_cache_memory_gb", "tensor_parallel_size", "adapter_mode",
                "vllm_engine_args"}
IN_PROCESS = {"mode": "in-process"}


def sidecar(out: Path, kind: str) -> Path:
    """`verdicts.jsonl` -> `verdicts.<kind>.json`."""
    return out.with_suffix(f".{kind}.json")


def engine_record(engine_config: Any) -> dict | None:
    """An engine config's fields as a settings record holds them (its `settings()` where it has one, as
    the OpenAI engine's, whose endpoint fields are written flat); None for no config dataclass."""
    if hasattr(engine_config, "settings"):
        return engine_config.settings()
    return asdict(engine_config) if is_dataclass(engine_config) else None


def run_settings(pipeline: PipelineConfig, engine_config: Any = None, *, bank_sha: str, prompts_sha: str,
                 model: str | None = None) -> dict:
    """The settings record of a verdict file, the same whatever scores it: pipeline settings, model
    (the engine's name; default: the engine config's `name`, else its `model`), adapter, engine
    settings, bank and prompt hashes, package version. Built from configs, so a driver that never
    loads a model (Ray) writes what an in-process run writes."""
    if model is None:
        model = getattr(engine_config, "name", None) or getattr(engine_config, "model", None)
    return {**asdict(pipeline), "ablation": pipeline.ablation, "model": model,
            "adapter": getattr(engine_config, "adapter", None),
            "max_visual_tokens": getattr(engine_config, "max_visual_tokens", None),
            "engine": engine_record(engine_config), "bank_sha": bank_sha,
            "prompts_sha": prompts_sha, "package_version": __version__}


def vars_of(pipe: AdaptRubric) -> dict:
    """`run_settings` of a pipeline with its engine loaded."""
    eng = pipe.engine
    return run_settings(pipe.config, eng.config if eng is not None else None, bank_sha=pipe.bank.sha,
                        prompts_sha=pipe.prompts.sha, model=eng.name if eng is not None else None)


def verdict_settings(meta: dict) -> dict:
    """The part of a run's config that decides its verdicts (flattened, runtime-only keys left out)."""
    out = {}
    for k, v in meta.items():
        if k == "engine" and isinstance(v, dict):
            out.update({f"engine.{ek}": ev for ek, ev in v.items() if ek not in RUNTIME_ONLY})
        elif k not in RUNTIME_ONLY and k not in ("forced_resumes", "created"):
            out[k] = v
    return out


def settings_diff(old: dict, new: dict) -> list[str]:
    """'key: old -> new' for each verdict-deciding setting that differs."""
    a, b = verdict_settings(old), verdict_settings(new)
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def check_resume(out: Path, meta: dict, force: bool) -> dict:
    """The config to keep in the sidecar when resuming `out` with `meta`'s settings, or ValueError."""
    path = sidecar(out, "config")
    if not path.is_file():
        return meta
    old = json.loads(path.read_text())
    diff = settings_diff(old, meta)
    if not diff:  # where the data lies now, and how this run runs
        return {**old, "data": meta.get("data", old.get("data")),
                **{k: meta[k] for k in ("data_fingerprint", "runtime") if k in meta}}
    if not force:
        raise ValueError(f"--resume: {out} was begun with other settings ({'; '.join(diff)}). Use the original flags, "
                         f"write to a new --out, or pass --force-settings to mix them (recorded in {path.name})")
    when = datetime.datetime.now().isoformat(timespec="seconds")
    old.setdefault("forced_resumes", []).append({"at": when, "differences": diff})
    return old


def file_meta(settings: dict, data: str | Path, extra: dict | None = None,
              calibration: str | Path | None = None) -> tuple[dict, Any]:
    """(the config sidecar a run with `settings` writes, the loaded calibration or None)."""
    from .evaluation.calibration import load as load_calibration
    from .evaluation.calibration import provenance

    meta = {**settings, "data": str(data), "data_fingerprint": data_fingerprint(data), **(extra or {})}
    cal = None
    if calibration is not None:
        cal, prov = load_calibration(calibration)
        meta.update(provenance(prov))
    return meta, cal


def precheck_out(out: str | Path, settings: dict, data: str | Path, resume: bool = False, force: bool = False,
                 extra: dict | None = None, calibration: str | Path | None = None) -> None:
    """`score_with`'s checks of `out`, before any model loads: ValueError when `out` holds lines and
    `resume` is off, or when resuming it with `settings` (a `planned_settings` record) would be
    refused; writes nothing."""
    out = Path(out)
    if not resume:
        check_fresh(out)
    elif sidecar(out, "config").is_file():
        check_resume(out, file_meta(settings, data, extra, calibration)[0], force)


IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp"}


def data_fingerprint(data: str | Path) -> str | None:
    """What identifies the data a run scored, wherever it lies (`merge-shards` compares the shards' with
    DATA's): the sha256 of a file's bytes; of a folder, of each file's relative path and size and, but for
    screenshots, its bytes. None for data that is not a file or folder here."""
    path = Path(data)
    if not path.exists():
        return None
    st = path.stat()
    return _fingerprint(str(path.resolve()), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _fingerprint(path: str, mtime_ns: int, size: int) -> str:
    """The fingerprint of `path` as it is at (`mtime_ns`, `size`): computed once per run."""
    h = hashlib.sha256()
    root = Path(path)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for f in files:
        if f != root:
            h.update(f"{f.relative_to(root).as_posix()}\0{f.stat().st_size}\0".encode())
            if f.suffix.lower() in IMAGE_SUFFIXES:
                continue
        with open(f, "rb") as fh:
            for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                h.update(block)
    return "sha256:" + h.hexdigest()


def check_fresh(out: Path) -> None:
    if out.exists() and out.stat().st_size:
        raise ValueError(f"{out} exists; pass --resume to continue it or choose another output")


def planned_settings(pipeline: PipelineConfig, engine_options: dict) -> dict:
    """The settings record (with `runtime`) of an in-process run with these pipeline settings and
    `engine.build.build_engine` options, from the configs alone: what `vars_of` gives once the
    engine has loaded, known before it does."""
    from .bank import load_bank
    from .engine.build import engine_config
    from .prompts import load_prompts

    return {**run_settings(pipeline, engine_config(**engine_options), bank_sha=load_bank(pipeline.bank_path).sha,
                           prompts_sha=load_prompts().sha), "runtime": dict(IN_PROCESS)}


