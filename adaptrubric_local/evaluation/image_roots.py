"""A labelled copy read without its screenshots' folders: when most records of a data set did not load
because their screenshots lie outside its folder (a `labels merge` copy read without --image-root),
the figures would be over the few that loaded, so the evaluation commands stop with the fix. Reads
the copy's merge.json for the folders to name; knows nothing about verdicts or metrics.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..formats.base import OUTSIDE_ROOTS


def outside_image_roots(loaded, data: str | Path | None = None) -> None:
    """Raise ValueError with the fix (the folders the copy's merge.json records, when it has one) when most
    records of `loaded` did not load because their screenshots lie outside the data folder."""
    if loaded is None:
        return
    outside = [e for e in loaded.errors if OUTSIDE_ROOTS in str(e)]
    total = len(loaded.errors) + len(loaded.trajectories)
    if not outside or 2 * len(outside) < total:
        return
    roots = []
    if data is not None:
        merge = (Path(data) if Path(data).is_dir() else Path(data).parent) / "merge.json"
        try:
            roots = json.loads(merge.read_text()).get("image_roots") or []
        except (OSError, ValueError, AttributeError):
            roots = []
    fix = (" ".join(f"--image-root {r}" for r in roots) + f" (the folders {merge} records)" if roots
           else "--image-root DIR, DIR being the folder that holds them (for a `labels merge` copy: the original "
                "data folder)")
    raise ValueError(f"{len(outside)} of the {total} records of {data or 'the data set'} name screenshots outside its "
                     f"folder, so they did not load and the data gives them no label (the first: "
                     f"{str(outside[0]).split(': image path')[0]}). "
                     f"Pass {fix}")
