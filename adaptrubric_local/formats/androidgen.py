"""AndroidGen trajectory folders, read as THUDM/AndroidGen writes them (commit 3f511cf):

- `recorder.py` L6-38 (`Recorder`): `<TRACE_DIR>/<id>/record.jsonl` (TRACE_DIR is `./episodes` in its
  `config.json`; the id is the start time in seconds), one JSON object per step with `instruction`,
  `trace_id`, `index`, the environment's record (`env`, `app`, `state` (UI tree), `image` (Set-of-Mark
  screenshot), `raw` (plain screenshot), both copied to `<id>/screenshots/` and written relative to
  TRACE_DIR), the agent's output (`plan`, `response`) and `parsed_action`; the final `exit` action's
  message is the answer. `run.py` L35-50 takes the screen state, then acts on it: `SCREENS =
  "before"`.
- Labels: `model/judge/judge.py` L80-154 writes `database.json` (default `./database.json`, beside the
  default `./episodes`), keyed by episode folder, `complete: true/false`; a run the judge could not verify
  is left out (L35-52, L99-101): no label. Its sub-goal entries (`<folder>-<k>`, with `step`) are not
  episodes and are not read. The loader takes `database.json` from beside the episodes folder (or inside
  it); `load(..., database=PATH)` points at another (on the command line, `--labels PATH/database.json`:
  `labels.androidgen_database`). A `labels.jsonl` (`trace_id`, `label`) in the episodes
  folder, a person's labels, wins over the judge's.

Given the project root (holding `episodes/`), the episodes folder, one trace folder or its
`record.jsonl`. A trace's id is its `trace_id` field, else its folder name. Not read: `plan`, `env`,
`app`, the judge's `conditions`.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

from ..types import Step, Trajectory
from .actions_text import described_step, gather
from .base import (
    DataError,
    LoadResult,
    Roots,
    check_nonempty,
    iter_json_lines,
    load_json,
    own_id,
    parse_label,
    resolve_image,
    tag,
)

SCREENS = "before"
SHAPE = "*/record.jsonl or episodes/*/record.jsonl (AndroidGen)"
LOOKED_FOR = "record.jsonl (AndroidGen) in the folder, its sub-folders or its episodes/ sub-folders"

_ELEMENT = re.compile(r'<element id="(\d+)"[^>]*>(.*?)</element>', re.S)


def _element_label(state: Any, element_id: Any) -> str | None:
    if not isinstance(state, str) or element_id is None:
        return None
    return next((" ".join(text.split())[:60] or None for eid, text in _ELEMENT.findall(state)
                 if eid == str(element_id)), None)


def describe_action(pa: Any, state: Any) -> tuple[str, str | None, str | None, str | None]:
    """(action text, action_type, typed text, answer) for one AndroidGen `parsed_action`."""
    if not isinstance(pa, dict):
        return (json.dumps(pa, ensure_ascii=False), None, None, None)
    op, act, kw = pa.get("operation"), pa.get("action"), pa.get("kwargs") or {}
    if op == "exit":
        msg = kw.get("message")
        return (f"finish(answer={json.dumps(msg, ensure_ascii=False)})", "answer", None, msg)
    if op == "open_app":
        return (f"open_app({kw.get('app_name')!r})", "open_app", None, None)
    if op == "quote":
        return (f"quote({json.dumps(kw.get('content'), ensure_ascii=False)})", "read", None, None)
    name = (act or op or "unknown").lower().replace(" ", "_")
    if name == "input_text":
        text = kw.get("text")
        return (f"type({json.dumps(text, ensure_ascii=False)}) into element {kw.get('element_id')}",
                "type", text, None)
    if name in ("click", "long_press", "tap"):
        label = _element_label(state, kw.get("element_id"))
        suffix = f" {json.dumps(label, ensure_ascii=False)}" if label else ""
        return (f"{name}(element {kw.get('element_id')}{suffix})", "tap" if name != "long_press" else name,
                None, None)
    args = ", ".join(f"{k}={v!r}" for k, v in kw.items())
    return (f"{name}({args})", name, None, None)


def detect(p: Path) -> bool:
    """A record.jsonl, a trace folder, an episodes folder, or a project root holding `episodes/`."""
    if p.is_file():
        return p.name == "record.jsonl"
    return (p / "record.jsonl").is_file() or any(p.glob("*/record.jsonl")) or any(p.glob("episodes/*/record.jsonl"))


def database_labels(path: Path, warnings: list[str]) -> dict[str, int]:
    """Folder name -> 0/1 from an AndroidGen judge `database.json` (episode entries only: sub-goal
    entries carry `step`); an unreadable file or entry is a warning, not a lost data set."""
    try:
        doc = load_json(path)
    except DataError as exc:
        warnings.append(f"{exc}: read no labels from it")
        return {}
    if not isinstance(doc, dict):
        warnings.append(f"{path}: not an AndroidGen database (a JSON object keyed by episode): read no labels")
        return {}
    out = {}
    for key, entry in doc.items():
        if not isinstance(entry, dict) or "step" in entry:
            continue
        if isinstance(entry.get("complete"), bool):
            out[str(key)] = int(entry["complete"])
        else:
            warnings.append(f"{path}, entry {key!r}, field 'complete': expected true or false, got "
                            f"{entry.get('complete')!r}: no label")
    return out


def _labels(root: Path) -> dict[str, int]:
    path = root / "labels.jsonl"
    if not path.is_file():
        return {}
    out, scratch = {}, LoadResult()
    for record, obj in iter_json_lines(path, scratch):
        with contextlib.suppress(KeyError, TypeError, AttributeError, DataError):
            out[str(obj["trace_id"])] = parse_label(obj.get("label"), path, record, "label")
    return out


def load_trace(record_file: Path, root: Path, labels: dict[str, int], check_images: bool = True,
               image_roots: Roots = ()) -> LoadResult:
    """Load one `record.jsonl` (one trajectory) into a LoadResult; its errors carry the trace id."""
    result = LoadResult()
    rows = list(iter_json_lines(record_file, result))
    ids = [own_id(obj.get("trace_id")) for _, obj in rows if isinstance(obj, dict)]
    trace_id = next((i for i in ids if i is not None), record_file.parent.name)
    if (bad := next((rec for rec, obj in rows if not isinstance(obj, dict)), None)) is not None:
        result.errors.append(DataError(record_file, "step is not a JSON object", bad))
    if not result.errors:  # a step we could not read would silently shorten the trajectory
        with result.catching():
            result.trajectories.append(_trace(rows, record_file, root, trace_id, labels, check_images,
                                              tuple(image_roots), result))
    result.errors = [tag(e, trace_id) for e in result.errors]
    return result


def _trace(rows: list, record_file: Path, root: Path, trace_id: str, labels: dict[str, int], check_images: bool,
           image_roots: tuple, result: LoadResult) -> Trajectory:
    if not rows:
        raise DataError(record_file, "no steps", None, "steps")
    rows.sort(key=lambda r: r[1].get("index", 0) if isinstance(r[1].get("index"), int) else 0)
    plain = [bool(obj.get("raw")) and (root / str(obj["raw"])).is_file() for _, obj in rows]

    def step(record: str, obj: dict, key: str) -> tuple[Step, str | None]:
        shot = resolve_image(root, obj.get(key), record_file, record, key, check_images, image_roots)
        thought = obj.get("response") if isinstance(obj.get("response"), str) else None
        return described_step(shot, describe_action(obj.get("parsed_action"), obj.get("state")), thought)

    steps, answer = gather(step(record, obj, "raw" if p else "image") for (record, obj), p in zip(rows, plain))
    if fallback := sum(not p and bool(obj.get("raw")) for p, (_, obj) in zip(plain, rows)):
        result.warnings.append(f"{record_file}: {fallback} step(s) have no plain 'raw' screenshot; "
                               "used the annotated 'image' instead")
    instruction = rows[0][1].get("instruction")
    if not isinstance(instruction, str):
        raise DataError(record_file, "required field missing", rows[0][0], "instruction")
    traj = Trajectory(id=trace_id, instruction=instruction, steps=steps, answer=answer, platform="android",
                      label=labels.get(trace_id, labels.get(record_file.parent.name)), source=str(record_file))
    return check_nonempty(traj, record_file, f"trace {trace_id}")


def load(path: Path, check_images: bool = True, image_roots: Roots = (),
         database: str | os.PathLike | None = None) -> LoadResult:
    """Load an AndroidGen project root (holding `episodes/`), a folder of traces, a single trace folder, or
    its `record.jsonl`; labels from `database` (default: the judge's `database.json` found as the module
    docstring says) and the folder's `labels.jsonl`."""
    path = Path(path).parent if Path(path).name == "record.jsonl" and Path(path).is_file() else Path(path)
    if (path / "record.jsonl").is_file():
        files, root = [path / "record.jsonl"], path.parent
    else:  # a project root holding only episodes/, else the episodes folder itself
        nested = not any(path.glob("*/record.jsonl")) and any(path.glob("episodes/*/record.jsonl"))
        root = path / "episodes" if nested else path
        files = sorted(root.glob("*/record.jsonl"))
    result = LoadResult()
    database = Path(database) if database is not None else next(  # the judge's default, beside the episodes
        (c for c in (root.parent / "database.json", root / "database.json") if c.is_file()), None)
    if database is not None and not database.is_file():
        raise DataError(database, "no such file (given as the AndroidGen judge's database.json)")
    labels = {**(database_labels(database, result.warnings) if database else {}), **_labels(root)}
    for f in files:
        result.extend(load_trace(f, root, labels, check_images, image_roots))
    return result
