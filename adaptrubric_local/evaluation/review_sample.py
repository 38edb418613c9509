"""The cards of the review page: every verdict evaluated, or for a large run a sample of them. The
sample is the `cards` ids (of the verdict file and of the trajectories without a verdict) with the
smallest seeded hash: the same ids for the same file and seed whatever the lines' order, drawn in one
pass; a second pass keeps those ids' last lines and trajectories, so memory grows with the cards shown.
Knows nothing about metrics or argument parsing.
"""
from __future__ import annotations

import hashlib
import heapq
from dataclasses import replace
from itertools import chain
from pathlib import Path
from types import SimpleNamespace

from ..cascade.scorer import CascadeVerdict
from ..formats.stream import as_stream, stream_trajectories
from ..types import Verdict
from ..verdict_file import iter_lines
from .coverage import MISSING, Coverage
from .verdict_table import last_lines, task_of

REVIEW_CARDS = 2000  # cards on the review page of `eval` at most (a sample of a larger run)
SEED = 42


def _rank(seed: int, i: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}:{i}".encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "big")


def last_verdicts(path: Path, ids: set[str] | None = None) -> list[Verdict]:
    """The last line of each id (of `ids`; None: every id) as a Verdict (a cascade's line: CascadeVerdict)."""
    return [(CascadeVerdict if "decided_by" in d else Verdict).from_dict(d) for d in last_lines(path)
            if ids is None or str(d["id"]) in ids]


def sample_ids(path: Path, cards: int, seed: int = SEED, more: list[str] = ()) -> set[str] | None:
    """The `cards` ids of the verdict file and of `more` (trajectories without a verdict) with the smallest
    seeded hash (every id when there are fewer); None for `cards` 0: every id."""
    if not cards:
        return None
    heap: list[tuple[int, str]] = []  # (-rank, id): the largest rank kept on top
    kept: set[str] = set()
    for i in chain((str(d["id"]) for _, _, d in iter_lines(path)), more):
        if i in kept:
            continue
        r = _rank(seed, i)
        if len(heap) < cards:
            heapq.heappush(heap, (-r, i))
            kept.add(i)
        elif r < -heap[0][0]:
            kept.discard(heapq.heapreplace(heap, (-r, i))[1])
            kept.add(i)
    return kept


def sampled(path: Path, data, cards: int, coverage: Coverage, seed: int = SEED, fmt: str = "auto", image_roots=(),
            labels: dict | None = None, loaded=None) -> tuple[list[Verdict], SimpleNamespace | None]:
    """The cards of a sample of `cards` (0: all) of the verdicts `coverage` evaluated: their verdicts (with
    the data's label, platform and task, the 0/1 of `labels` over them; `missing` ones for trajectories
    without a verdict) and the data's trajectories for them (`loaded`: the data set already loaded)."""
    ids = sample_ids(path, cards, seed, coverage.missing if coverage.subset == "data" else [])
    verdicts = last_verdicts(path, ids)
    if data is None and loaded is None:
        return verdicts, None
    stream = as_stream(loaded) if loaded is not None else \
        stream_trajectories(data, fmt=fmt, check_images=False, image_roots=image_roots)
    trajs = [x for _, x in stream.items(keep=lambda _, own: ids is None or own is None or own in ids)
             if not isinstance(x, Exception) and (ids is None or x.id in ids)]  # the others unparsed
    for t in trajs:
        if (labels or {}).get(t.id) is not None:
            t.label = labels[t.id]
    # the verdicts as the table evaluated them (verdict_table.align decided which): stale and extra ones out,
    # the data's label, platform and task on the others (none for a record that did not load), a `missing`
    # one for each trajectory without a verdict when the subset is the data's
    by_id, gone = {t.id: t for t in trajs}, {*coverage.extra, *coverage.stale_errors}
    out = [replace(v, label=t.label, platform=t.platform, task_id=task_of(t)) if (t := by_id.get(str(v.id)))
           else replace(v, label=None) for v in verdicts if str(v.id) not in gone]
    if coverage.subset == "data":
        have = {str(v.id) for v in out}
        out += [Verdict(id=t.id, status=MISSING, label=t.label, platform=t.platform, task_id=task_of(t),
                        error="no verdict for this trajectory in the verdict file") for t in trajs if t.id not in have]
    return out, SimpleNamespace(trajectories=trajs)


def note(shown: int, of: int, cards: int, seed: int = SEED) -> str:
    """What the page says of its sample."""
    return (f"this page shows {shown} of the {of} verdicts: a sample of at most {cards} drawn by a hash of the id "
            f"(seed {seed}), so the same run gives the same cards; the figures above are over all {of}. "
            "Pass --review-cards N for more (0: every card), or `adaptrubric review --order ... --budget N` "
            "for a labelling batch")
