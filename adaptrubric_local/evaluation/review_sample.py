"""The review page of a large run: a sample of its cards, not one card per verdict (a page of a million
cards is one no browser opens). The sample is the `cards` verdict ids with the smallest seeded hash:
the same ids for the same file and seed whatever the lines' order, drawn in one pass that keeps
`cards` ids; a second pass keeps those ids' last verdict lines and the data's trajectories for them,
so memory grows with the cards shown, not with the run. The page says how many of how many it shows.

Knows nothing about metrics or argument parsing: `harness.run_eval` calls it with the metrics it
computed over columns.
"""
from __future__ import annotations

import hashlib
import heapq
from pathlib import Path
from types import SimpleNamespace

from ..cascade.scorer import CascadeVerdict
from ..formats.stream import stream_trajectories
from ..schema import json_lines
from ..types import Verdict
from . import coverage as C

REVIEW_CARDS = 2000  # cards on the review page of `eval` at most (a sample of a larger run)
SEED = 42


def _rank(seed: int, i: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}:{i}".encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "big")


def sample_ids(path: Path, cards: int, seed: int = SEED) -> set[str]:
    """The `cards` ids of the verdict file with the smallest seeded hash (every id when it has fewer)."""
    heap: list[tuple[int, str]] = []  # (-rank, id): the largest rank kept on top
    kept: set[str] = set()
    with open(path, encoding="utf-8") as fh:
        for _, d in json_lines(fh, path):
            i = str(d["id"])
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


def sampled(path: Path, data, cards: int, seed: int = SEED, fmt: str = "auto", image_roots=(),
            labels: dict | None = None) -> tuple[list[Verdict], SimpleNamespace | None]:
    """The sample's verdicts (the last line of each id; labels from the data when given, with the 0/1 of
    `labels`, id -> label, the labels files' last word, over them) and the data's trajectories for them."""
    ids = sample_ids(path, cards, seed)
    last: dict[str, dict] = {}
    with open(path, encoding="utf-8") as fh:
        for _, d in json_lines(fh, path):
            if str(d["id"]) in ids:
                last[str(d["id"])] = d
    verdicts = [(CascadeVerdict if "decided_by" in d else Verdict).from_dict(d) for d in last.values()]
    if data is None:
        return verdicts, None
    stream = stream_trajectories(data, fmt=fmt, check_images=False, image_roots=image_roots)
    trajs = [x for _, x in stream.items(keep=lambda _, own: own is None or own in ids)  # the others unparsed
             if not isinstance(x, Exception) and x.id in ids]
    for t in trajs:
        if (labels or {}).get(t.id) is not None:
            t.label = labels[t.id]
    verdicts, _ = C.align(verdicts, trajs, "verdicts", allow_extra=True)
    return verdicts, SimpleNamespace(trajectories=trajs)


def more_lines(path: str | Path, k: int) -> bool:
    """Whether the file at `path` has more than `k` lines (`k` 0: no limit, False), counted in bytes."""
    n = 0
    with open(path, "rb") as fh:
        while k and n <= k and (chunk := fh.read(1 << 20)):
            n += chunk.count(b"\n")
    return bool(k) and n > k


def note(shown: int, of: int, cards: int, seed: int = SEED) -> str:
    """What the page says of its sample."""
    return (f"this page shows {shown} of the {of} verdicts: a sample of at most {cards} drawn by a hash of the id "
            f"(seed {seed}), so the same run gives the same cards; the figures above are over all {of}. "
            "Pass --review-cards N for more (0: every card), or `adaptrubric review --order ... --budget N` "
            "for a labelling batch")
