"""Trajectories held in a Hugging Face `datasets` data set: a `save_to_disk` folder (a Dataset or a
DatasetDict) or Parquet files, read through `datasets` itself (`load_from_disk`, `Dataset.from_parquet`;
the optional extra `adaptrubric-local[datasets]`).

One row is one trajectory. Which column holds what is a column mapping (`ColumnMapping`), a strict
schema: given in Python (`load_hf_dataset(path, mapping=...)`) or as `adaptrubric-columns.yaml` in the
data set's folder (beside the Parquet files); without one, the columns are taken to have the canonical
names (`id`, `instruction`, `screenshots`, `actions`, ...). So a new benchmark needs a mapping, not code.

Screenshots: an `Image` column or a list of them (bytes or a path), a binary column, or path strings
(relative to the data set's folder). Bytes are written once, as they are, to an image cache folder
(default `<data set folder>/adaptrubric-images/`, named by SHA-256) because the pipeline reads
screenshots from files. `screens`: whether screenshot i is the screen before action i or after it.

Knows nothing about any one benchmark's columns: those are mappings.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from ..types import Step, Trajectory
from .actions_text import code_step
from .base import DataError, LoadResult, Roots, check_nonempty, own_id, parse_label, resolve_image

MAPPING_FILE = "adaptrubric-columns.yaml"
CACHE_DIR = "adaptrubric-images"
_MAGIC = ((rb"\x89PNG\r\n\x1a\n", ".png"), (rb"\xff\xd8\xff", ".jpg"), (b"GIF8", ".gif"), (b"BM", ".bmp"),
          (b"RIFF....WEBP", ".webp"))


@dataclass(frozen=True)
class ColumnMapping:
    """Which column holds each field of a trajectory; None: the data set has no such column.

    `id` None numbers the rows (`<split>/<row>`); `screenshots` is required; `actions` and `thoughts`
    hold one entry per step; `no_label` lists label values that mean "no label" (the trajectory loads
    with none, and a warning counts them), e.g. Online-Mind2Web's 2 (not executable); `screens` is
    "before" (screenshot i is what the agent saw before action i) or "after" (what action i produced);
    `split` reads one split of a DatasetDict (None: every split)."""

    id: str | None = "id"
    instruction: str = "instruction"
    screenshots: str = "screenshots"
    actions: str | None = "actions"
    thoughts: str | None = None
    answer: str | None = "answer"
    label: str | None = "label"
    platform: str | None = "platform"
    task_id: str | None = "task_id"
    no_label: tuple = ()
    screens: str = "before"
    split: str | None = None
    default_platform: str | None = None

    def __post_init__(self):
        if self.screens not in ("before", "after"):
            raise ValueError(f"screens must be 'before' or 'after', got {self.screens!r}")
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name not in ("no_label", "screens") and v is not None and not (isinstance(v, str) and v.strip()):
                raise ValueError(f"column mapping field {f.name!r} must be a column name or null, got {v!r}")
        object.__setattr__(self, "no_label", tuple(self.no_label))

    @classmethod
    def from_file(cls, path: Path) -> ColumnMapping:
        """A mapping from YAML/JSON; an unknown key or a bad value is a DataError naming the file."""
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise DataError(path, f"cannot read the column mapping: {exc}") from None
        if not isinstance(raw, dict):
            raise DataError(path, "a column mapping is a mapping of field: column")
        known = {f.name for f in fields(cls)}
        if unknown := [k for k in raw if k not in known]:
            raise DataError(path, f"unknown key; the column mapping knows {', '.join(sorted(known))}", field=unknown[0])
        try:
            return cls(**raw)
        except (TypeError, ValueError) as exc:
            raise DataError(path, str(exc)) from None

    def used_columns(self) -> list[str]:
        """The columns this mapping reads."""
        names = ("id", "instruction", "screenshots", "actions", "thoughts", "answer", "label", "platform", "task_id")
        return [v for n in names if (v := getattr(self, n)) is not None]


@dataclass
class _Source:
    root: Path
    file: Path
    cache: Path
    check_images: bool
    roots: tuple


def is_hf_dataset(p: Path) -> bool:
    """A save_to_disk folder, a Parquet file, or a folder holding Parquet files (not below)."""
    if p.is_file():
        return p.suffix == ".parquet"
    saved = (p / "state.json").is_file() and (p / "dataset_info.json").is_file()
    return saved or (p / "dataset_dict.json").is_file() or any(p.glob("*.parquet"))


def _open(p: Path) -> dict[str, Any]:
    """{split name: Dataset} through `datasets` itself."""
    try:
        import datasets
    except ImportError:
        raise DataError(p, "reading a Hugging Face data set needs the `datasets` package: "
                           "pip install 'adaptrubric-local[datasets]'") from None
    if p.is_dir() and not any(p.glob("*.parquet")):
        obj = datasets.load_from_disk(str(p))
        return dict(obj) if isinstance(obj, datasets.DatasetDict) else {"train": obj}
    files = [str(p)] if p.is_file() else sorted(str(f) for f in p.glob("*.parquet"))
    return {"train": datasets.Dataset.from_parquet(files)}


def _image_file(data: bytes, hint: Any, src: _Source, record: str, fname: str) -> str:
    ext = next((e for magic, e in _MAGIC if re.match(magic, data, re.S)), None)
    ext = ext or (Path(hint).suffix.lower() if isinstance(hint, str) else None)
    if not ext:
        raise DataError(src.file, "image bytes of an unknown type (not PNG, JPEG, GIF, BMP or WebP)", record, fname)
    out = src.cache / (hashlib.sha256(data).hexdigest() + ext)
    if not out.is_file():
        try:
            src.cache.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(out.suffix + ".part")
            tmp.write_bytes(data)
            os.replace(tmp, out)
        except OSError as exc:
            raise DataError(src.cache, f"cannot write the image cache ({exc.strerror}); give another folder "
                                       "(image_cache=DIR)", record, fname) from None
    return str(out.resolve())


def _image(value: Any, src: _Source, record: str, fname: str) -> str:
    """A file path for one image cell: bytes go to the cache, a path is resolved in the data set."""
    if isinstance(value, dict) and ("bytes" in value or "path" in value):
        if value.get("bytes"):
            return _image_file(value["bytes"], value.get("path"), src, record, fname)
        value = value.get("path")
    if isinstance(value, (bytes, bytearray)):
        return _image_file(bytes(value), None, src, record, fname)
    if hasattr(value, "save") and hasattr(value, "mode"):  # a decoded PIL image
        import io
        buf = io.BytesIO()
        value.save(buf, format="PNG")
        return _image_file(buf.getvalue(), None, src, record, fname)
    return resolve_image(src.root, value, src.file, record, fname, src.check_images, src.roots)


def _as_list(row: dict, column: str | None) -> list:
    value = row.get(column)
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def _text(v: Any) -> str | None:
    return v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)


def _steps(row: dict, m: ColumnMapping, src: _Source, record: str) -> tuple[list[Step], str | None]:
    shots = _as_list(row, m.screenshots)
    paths = [_image(v, src, record, f"{m.screenshots}[{i}]") for i, v in enumerate(shots)]
    actions, thoughts = _as_list(row, m.actions), _as_list(row, m.thoughts)
    if m.screens == "after":  # action i produced screen i: pair it with screen i-1, the last is the final screen
        paths = [None, *paths]
    if len(paths) not in (len(actions), len(actions) + 1) and actions:
        raise DataError(src.file, f"{len(shots)} screenshots for {len(actions)} actions: with screens="
                                  f"{m.screens!r} they cannot be paired", record, m.screenshots)
    steps, answer = [], None
    for i, shot in enumerate(paths):
        if i < len(actions):
            step, said = code_step(shot, _text(actions[i]), thoughts[i] if i < len(thoughts) else None)
            answer = said or answer
        else:
            step = Step(screenshot=shot, action="(final screen)" if actions else "(screen)", action_type="observe")
        steps.append(step)
    return steps, answer


def _trajectory(row: dict, index: str, m: ColumnMapping, src: _Source, warnings: list[str]) -> Trajectory:
    rid = own_id(row.get(m.id)) if m.id else index
    record = f"row {index}" + (f" (id {rid})" if rid and m.id else "")
    if rid is None:
        raise DataError(src.file, "id missing or not a string/integer", record, m.id)
    instruction = row.get(m.instruction)
    if not isinstance(instruction, str):
        raise DataError(src.file, "instruction missing or not a string", record, m.instruction)
    steps, said = _steps(row, m, src, record)
    label_value = row.get(m.label)
    if label_value is not None and str(label_value) in {str(v) for v in m.no_label}:
        warnings.append(f"{src.file}: {record}: label {label_value!r} means no label (no_label); loaded unlabelled")
        label_value = None
    platform = row.get(m.platform)
    traj = Trajectory(id=rid, instruction=instruction, steps=steps, answer=_text(row.get(m.answer)) or said,
                      platform=str(platform) if platform is not None else m.default_platform,
                      task_id=_text(row.get(m.task_id)), label=parse_label(label_value, src.file, record, m.label),
                      source=f"{src.file}#{index}")
    return check_nonempty(traj, src.file, record)


def load_hf_dataset(path: str | os.PathLike, check_images: bool = True, image_roots: Roots = (),
                    mapping: ColumnMapping | None = None, image_cache: str | os.PathLike | None = None) -> LoadResult:
    """Every row of a save_to_disk folder or Parquet file(s) as a trajectory, by `mapping` (else the
    folder's adaptrubric-columns.yaml, else canonical column names); image bytes go to `image_cache`
    (default `<folder>/adaptrubric-images`). One bad row is an error that keeps its id."""
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    m = mapping or (ColumnMapping.from_file(folder / MAPPING_FILE) if (folder / MAPPING_FILE).is_file()
                    else ColumnMapping())
    root = folder.resolve()
    src = _Source(root, p, Path(image_cache).resolve() if image_cache else root / CACHE_DIR, check_images,
                  (root, *image_roots))
    result = LoadResult()
    splits = _open(p)
    if m.split is not None:
        if m.split not in splits:
            raise DataError(p, f"no split {m.split!r}; the data set has {', '.join(splits)}", field="split")
        splits = {m.split: splits[m.split]}
    for name, ds in splits.items():
        if missing := [c for c in m.used_columns() if c not in ds.column_names]:
            raise DataError(p, f"split {name!r} has no column {', '.join(map(repr, missing))} (columns: "
                               f"{', '.join(ds.column_names)}); give a column mapping ({MAPPING_FILE})",
                            field=missing[0])
        rows = (row for batch in ds.with_format("arrow").iter(batch_size=64) for row in batch.to_pylist())
        for k, row in enumerate(rows):
            index = f"{name}/{k}" if len(splits) > 1 or m.id is None else str(k)
            with result.catching(row.get(m.id) if m.id else index):
                result.trajectories.append(_trajectory(row, index, m, src, result.warnings))
    return result


# how formats/__init__.py registers this loader (detection, and what is said when nothing loads)
REGISTRATION = {"order": 55, "detect": is_hf_dataset,
                "shape": "save_to_disk or *.parquet (datasets)",
                "looked_for": f"a datasets save_to_disk folder or Parquet files, columns named by {MAPPING_FILE}"}

__all__ = ["CACHE_DIR", "MAPPING_FILE", "ColumnMapping", "is_hf_dataset", "load_hf_dataset"]
