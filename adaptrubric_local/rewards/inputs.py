"""What a reward call may be given, made into Trajectories: Trajectory objects, canonical record dicts
(or their JSON) or paths to trajectory files. Relative screenshot paths resolve against `data_root`
(default: the current directory) and then `image_roots`; absolute paths are used as they are (by the
service, with `confine`: only inside those folders). A screenshot may also be the image itself,
bytes or a `data:image/...;base64,` URL, checked and kept in a temporary folder for the call
(inline_images.py). Knows nothing about scoring, batching or HTTP.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..types import Trajectory, Verdict
from .config import RewardConfig
from .images import ImageStore, is_inline


def _inside(path: str | Path, roots: list[Path], where: str, what: str) -> Path:
    """`path` resolved, when it lies inside one of `roots` (symlinks followed); ValueError otherwise."""
    full = Path(path).resolve()
    allowed = [r.resolve() for r in roots]
    if not any(full == r or r in full.parents for r in allowed):
        raise ValueError(f"{where}: {what} {str(path)!r} lies outside the service's data_root and image_roots "
                         f"({', '.join(map(str, allowed))}): add its folder to image_roots "
                         "(serve --image-roots DIR) or send the screenshots inline (inline_images: true)")
    return full


def resolve_shot(rel: str, roots: list[Path], where: str, confine: bool = False) -> str:
    rel = rel.removeprefix("file://")
    if os.path.isabs(rel):
        return str(_inside(rel, roots, where, "screenshot path")) if confine else rel
    tried = []
    for root in roots:
        root_r = root.resolve()
        full = (root_r / rel).resolve()
        if full != root_r and root_r not in full.parents:
            raise ValueError(f"{where}: screenshot path {rel!r} escapes {root_r}")
        if full.is_file():
            return str(full)
        tried.append(str(full))
    raise ValueError(f"{where}: screenshot not found: {rel!r} (tried {', '.join(tried)}; set data_root or image_roots)")


def _shot(value: Any, roots: list[Path], images: ImageStore | None, where: str, confine: bool) -> Any:
    """A step's screenshot as a local path: inline images go to `images`, paths are resolved."""
    if is_inline(value):
        if images is None:
            raise ValueError(f"{where}: an inline screenshot (bytes or data URL) where none is accepted")
        return images.put(value, where)
    return resolve_shot(value, roots, where, confine) if isinstance(value, str) else value


def to_trajectory(obj: Any, cfg: RewardConfig, where: str = "trajectory",
                  images: ImageStore | None = None, confine: bool = False) -> Trajectory:
    """A Trajectory from a Trajectory, a canonical dict (or its JSON), or a path to trajectory data.
    Screenshots given inline (bytes or data URLs) are checked and written to `images`. With `confine`
    (the service: requests come from elsewhere), absolute paths, like relative ones, must lie inside
    data_root or image_roots."""
    from ..formats.canonical import parse_record

    if isinstance(obj, Trajectory):
        return obj
    if isinstance(obj, (bytes, bytearray)):
        obj = obj.decode("utf-8")
    if isinstance(obj, str) and obj.lstrip().startswith("{"):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not valid JSON: {exc}") from None
    if isinstance(obj, dict):
        roots = [cfg.root, *map(Path, cfg.image_roots)]
        steps = obj.get("steps")
        if isinstance(steps, list):
            obj = {**obj, "steps": [
                {**s, "screenshot": _shot(s["screenshot"], roots, images, f"{where}, steps[{i}].screenshot", confine)}
                if isinstance(s, dict) and s.get("screenshot") is not None else s
                for i, s in enumerate(steps)]}
        return parse_record(obj, Path("/"), Path(f"<{where}>"), where)
    if isinstance(obj, (str, Path)):
        path = obj if os.path.isabs(str(obj)) else cfg.root / obj
        if confine:
            path = _inside(path, [cfg.root, *map(Path, cfg.image_roots)], where, "trajectory path")
        t, errors = first_trajectory(Path(path), tuple(cfg.image_roots))
        if t is None:
            raise ValueError(f"{where}: no trajectory in {path}: {'; '.join(map(str, errors)) or 'empty'}")
        return t
    raise TypeError(f"{where}: expected a Trajectory, a canonical dict or a path, got {type(obj).__name__}")


def first_trajectory(path: Path, image_roots: tuple = ()) -> tuple[Trajectory | None, list]:
    """(the first trajectory of a data file, the bad records before it): a canonical JSONL file is read
    up to its first good record (a path into a million-line file reads one line, not the file); a
    folder or another format is loaded by its loader."""
    from ..formats import canonical, detect_format, load_trajectories
    from ..formats.base import DataError, LoadResult, check_image_roots, iter_json_lines

    if path.is_file() and detect_format(path) == "canonical":
        canonical.refuse_not_data(path)
        roots, result, errors = check_image_roots(image_roots), LoadResult(), []
        for record, obj in iter_json_lines(path, result):
            try:
                return canonical.parse_record(obj, path.parent, path, record, True, roots), errors + result.errors
            except DataError as exc:
                errors.append(exc)
        return None, errors + result.errors
    loaded = load_trajectories(path, image_roots=image_roots)
    return (loaded.trajectories[0] if loaded.trajectories else None), list(loaded.errors)


def item_id(obj: Any, where: str) -> str:
    """The id of the trajectory a call's item names, read without loading it (a Trajectory's, or the
    `id` of a record given as a dict or as its JSON, also JSON cut short after its leading id), so that
    an item which cannot be scored still answers under its own id. An item that names none (a path, a
    record without a usable id, other JSON that does not parse) answers under its location, `where`
    ("item 3"), as a bad record of a data file does under "file:line"."""
    from ..formats.base import leading_id, own_id

    if isinstance(obj, Trajectory):
        return obj.id
    if isinstance(obj, (bytes, bytearray)):
        obj = obj.decode("utf-8", "replace")
    if isinstance(obj, str) and obj.lstrip().startswith("{"):
        try:
            obj = json.loads(obj)
        except (json.JSONDecodeError, RecursionError):
            return leading_id(obj) or where
    if isinstance(obj, dict):
        return own_id(obj.get("id")) or where
    return where


def item_error(obj: Any, i: int, error: str) -> Verdict:
    """The error verdict of a call's item `i`, under the id it names (`item_id`)."""
    return Verdict(id=item_id(obj, f"item {i}"), status="error", error=error)


def load_items(items: list, cfg: RewardConfig, images: ImageStore, confine: bool = False
               ) -> tuple[list[tuple[int, Trajectory]], list[Verdict | None]]:
    """A call's items as (place, Trajectory) and, in a list as long as `items`, the error verdict of each
    item that cannot be read (None elsewhere): one bad item must not sink the call."""
    trajs, verdicts = [], [None] * len(items)
    for i, obj in enumerate(items):
        try:
            trajs.append((i, to_trajectory(obj, cfg, f"item {i}", images, confine=confine)))
        except Exception as exc:  # RecursionError included
            verdicts[i] = item_error(obj, i, str(exc))
    return trajs, verdicts


def traj_key(t: Trajectory) -> str:
    """Identity of a trajectory's content (two equal rollouts are scored once)."""
    return json.dumps(t.to_dict(), sort_keys=True, ensure_ascii=False)
