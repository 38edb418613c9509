"""OSReward traces, read as OS-Copilot/OSReward's own judge reads them (`eval_pipeline/run_judge.py` at
77dff13; trace format in `eval_pipeline/README.md` "Trace format", example `eval_pipeline/example/
example_trace.json`):

- JSON: one trace per file, `--traces` files or folders scanned recursively, dot-files skipped, a JSON that
  is not a trace skipped (`discover_traces` L164-184, `discover_json_traces` L95-114, `is_binary_trace`
  L86-92). A trace: `trace_id`, `task_id`, `platform` (Desktop | Mobile | Web), `agent`, `instruction`,
  `trajectory[]` (`step_index`, `screenshot_path` RELATIVE TO THE TRACE JSON's folder, `thought`,
  `action` such as `click(coordinate=[150, 608])`, `coordinate`, `meta_action`), `human_label`
  SUCCESS | FAIL (optional here: no label without it). A step without a screenshot path has no screenshot
  (`resolve_screenshots`, about L306-373, counts it as missing and goes on).
- Parquet (`discover_parquet_traces` L117-161, `PARQUET_METADATA_COLUMNS` L45-55): one row per trace, the
  same columns plus `screenshots`, a list as long as `trajectory` whose items are null (missing), bytes, or
  `{"bytes", "path"}` with a path relative to the Parquet file's folder. Embedded bytes are written once to
  a cache folder (`$XDG_CACHE_HOME` or ~/.cache, `adaptrubric-local/osreward-parquet/`), since a step
  names a file. Needs pyarrow (the `parquet` extra).

`SCREENS = "before"`: each step's screenshot is the screen its action was taken on (the judge
draws the action's click point on it, `image_to_data_url` about L238-286; the example's thoughts describe
the screen they act on). Typed text and an answer are read from `type(...)`/`answer(...)` actions (their `text` or
`content`). Not read: `agent`, `coordinate` marks, `frame_semantics`, `human_alignment`/`human_efficiency`.

OSReward's OSWorld-style samples (`benchmarking_analysis/data/raw/osworld/kimi-sample`) are read by the
OSWorld loader (their instruction from `runtime.log`: `runtime_log.py`).
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..types import Step, Trajectory
from .actions_text import action_text, described_step, gather, nonblank, step_objects
from .base import DataError, LoadResult, check_nonempty, load_json, own_id, parse_label, require, resolve_image
from .detect import peek_json

SCREENS = "before"
SHAPE = "trace JSON or Parquet (OSReward)"
LOOKED_FOR = "trace JSON files (objects with trace_id and trajectory) or OSReward Parquet shards anywhere below"
PARQUET_COLUMNS = ("trace_id", "task_id", "platform", "instruction", "trajectory", "human_label", "screenshots")


def is_trace(obj: Any) -> bool:
    """Whether a JSON object is an OSReward trace (has a trace_id and a trajectory list)."""
    return isinstance(obj, dict) and own_id(obj.get("trace_id")) is not None and isinstance(obj.get("trajectory"), list)


def _parquet_ok(f: Path) -> bool:
    try:
        import pyarrow.parquet as pq
        return set(PARQUET_COLUMNS) <= set(pq.ParquetFile(f).schema_arrow.names)
    except Exception:  # not a Parquet file pyarrow can read: not this format
        return False


def detect(p: Path) -> bool:
    """A trace JSON, an OSReward Parquet shard, or a folder with either below it."""
    if p.is_file():
        return p.suffix == ".json" or (p.suffix == ".parquet" and _parquet_ok(p))
    for f in sorted(p.rglob("*.json"))[:20]:
        doc = peek_json(f)
        if is_trace(doc) or (isinstance(doc, list) and any(is_trace(x) for x in doc[:5])):
            return True
    return any(_parquet_ok(f) for f in sorted(p.rglob("*.parquet"))[:3])


def call_of(action: Any) -> tuple[str | None, dict]:
    """The name and literal keyword arguments of a function-call action (`type(text='hi')`)."""
    if not isinstance(action, str):
        return None, {}
    try:
        node = ast.parse(action.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None, {}
    if not isinstance(node, ast.Call):
        return None, {}
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    kwargs = {}
    for kw in node.keywords:
        with contextlib.suppress(ValueError):
            kwargs[kw.arg] = ast.literal_eval(kw.value)
    if node.args and "text" not in kwargs:
        with contextlib.suppress(ValueError):
            kwargs["text"] = ast.literal_eval(node.args[0])
    return name, kwargs


def step_of(s: dict, shot: str | None) -> tuple[Step, str | None]:
    """One trajectory step and the answer it submits, if any."""
    action = action_text(s.get("action"))
    name, kwargs = call_of(action)
    kind = (s.get("meta_action") if isinstance(s.get("meta_action"), str) else None) or name
    value = kwargs.get("text", kwargs.get("content"))
    value, kind_l = (value if isinstance(value, str) else None), (kind or "").lower()
    typed = value if kind_l in ("type", "typewrite", "write", "input_text") else None
    answer = value if kind_l in ("answer", "finished", "finish") else None
    return described_step(shot, (action or "", kind, typed, answer), nonblank(s.get("thought")))


def parse(obj: Any, file: Path, shots: list[str | None], where: str) -> Trajectory:
    """One trace (its screenshots resolved, one per step or None) -> Trajectory; the caller tags errors with its id."""
    rec = f"{where} (trace {obj.get('trace_id')})" if isinstance(obj, dict) else where
    steps, answer = gather(step_of(s, shots[i]) for i, s in step_objects(obj, "trajectory", file, rec))
    traj = Trajectory(id=str(require(obj, "trace_id", file, rec, (str, int))),
                      instruction=require(obj, "instruction", file, rec), steps=steps, answer=answer,
                      platform=obj.get("platform") or None, task_id=own_id(obj.get("task_id")),
                      label=parse_label(obj.get("human_label"), file, rec, "human_label"), source=str(file))
    return check_nonempty(traj, file, rec)


def _json_shots(obj: Any, file: Path, check: bool, roots: tuple) -> list[str | None]:
    steps = obj.get("trajectory") if isinstance(obj, dict) and isinstance(obj.get("trajectory"), list) else []
    rec = f"trace {obj.get('trace_id')}" if isinstance(obj, dict) else "trace"
    rels = [s.get("screenshot_path") if isinstance(s, dict) else None for s in steps]
    return [resolve_image(file.parent, rel, file, rec, f"trajectory[{i}].screenshot_path", check, roots)
            if isinstance(rel, str) and rel else None for i, rel in enumerate(rels)]


def load_json_traces(files: list[Path], roots: tuple, check: bool, given_dir: bool) -> LoadResult:
    """Load trace JSON files; in a folder, JSON files that are not traces are skipped."""
    result = LoadResult()
    for f in files:
        with result.catching():
            doc = load_json(f)
            for k, obj in enumerate(doc if isinstance(doc, list) else [doc]):
                if given_dir and not is_trace(obj):
                    continue
                with result.catching(obj.get("trace_id") if isinstance(obj, dict) else None):
                    where = f"item {k}" if isinstance(doc, list) else "trace"
                    result.trajectories.append(parse(obj, f, _json_shots(obj, f, check, roots), where))
    return result


def _embedded(item: Any, f: Path, rec: str, i: int, out: Path, check: bool, roots: tuple) -> str | None:
    """One Parquet screenshot item -> a file path (embedded bytes written to `out` once)."""
    if item is None:
        return None
    data, name = (item, "") if isinstance(item, bytes) else (item.get("bytes"), item.get("path") or "")
    if data is None and name:
        return resolve_image(f.parent, name, f, rec, f"screenshots[{i}].path", check, roots)
    if not isinstance(data, bytes) or not data:
        raise DataError(f, "embedded image has no bytes", rec, f"screenshots[{i}]")
    target = out / f"step_{i:04d}{Path(name).suffix or '.png'}"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return str(target)


def load_parquet(files: list[Path], roots: tuple, check: bool) -> LoadResult:
    """Load OSReward Parquet shards, one trace per row."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(files[0], "reading OSReward Parquet needs pyarrow: pip install "
                                  "'adaptrubric-local[parquet]'") from None
    result = LoadResult()
    for f in files:
        table = pq.ParquetFile(f)
        if missing := sorted(set(PARQUET_COLUMNS) - set(table.schema_arrow.names)):
            result.errors.append(DataError(f, f"not an OSReward Parquet shard: columns {missing} missing"))
            continue
        st, home = f.stat(), os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        key = hashlib.sha256(f"{f.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
        cache = Path(home) / "adaptrubric-local" / "osreward-parquet" / key  # per shard path, size and mtime
        for n, row in enumerate(table.read(columns=list(PARQUET_COLUMNS)).to_pylist()):
            rec = f"row {n}"
            with result.catching(row.get("trace_id")):
                shots = row.get("screenshots") or []
                if len(shots) != len(row.get("trajectory") or []):
                    raise DataError(f, f"{len(shots)} screenshots for {len(row.get('trajectory') or [])} steps",
                                    rec, "screenshots")
                sub = cache / re.sub(r"[^\w.-]", "_", str(row.get("trace_id")))
                paths = [_embedded(x, f, rec, i, sub, check, roots) for i, x in enumerate(shots)]
                result.trajectories.append(parse(row, f, paths, rec))
    return result


def load(path: Path, check_images: bool = True, image_roots: Iterable[str | os.PathLike] = ()) -> LoadResult:
    """Load a trace JSON, a Parquet shard, or a folder of either (not both, as run_judge.py refuses)."""
    path = Path(path)
    roots = (path.parent if path.is_file() else path, *image_roots)
    if path.is_file():
        jsons, shards = ([], [path]) if path.suffix == ".parquet" else ([path], [])
    else:
        jsons = [f for f in sorted(path.rglob("*.json")) if not f.name.startswith(".")]
        shards = sorted(path.rglob("*.parquet"))
    if jsons and shards and any(is_trace(peek_json(f)) for f in jsons):
        raise DataError(path, "holds both trace JSON and Parquet shards; give one kind at a time")
    if shards:
        return load_parquet(shards, roots, check_images)
    return load_json_traces(jsons, roots, check_images, path.is_dir())
