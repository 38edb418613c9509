"""The audit's figures from running counts: the originals' verdicts kept as a few numbers each
(`OriginalVerdicts`), each perturbation's pairs counted as its verdict lines are read (`PairCounts`),
keeping only the ids the report names. The last line of an id counts. Knows nothing about the report's
rules (verdict.py) or its text (report.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..formats.ids import IdBuilder
from ..schema import json_lines
from ..verdict_file import iter_last_lines, iter_lines
from .perturbations import split_id

STATUS = {"ok": 0, "unparsed": 1, "error": 2}
NAMES = {v: k for k, v in STATUS.items()}
Compact = tuple  # (status, score, p_success, evidence_sufficient) of a verdict


def compact(d) -> Compact:
    """The fields a pair is compared on, from a verdict line's dict or a Verdict."""
    get = d.get if isinstance(d, dict) else (lambda k, default=None: getattr(d, k, default))
    p = get("p_success")
    return (get("status", "ok") or "ok", get("score"), p if isinstance(p, (int, float)) else None,
            get("evidence_sufficient"))


@dataclass
class PairCounts:
    """One perturbation's pairs (original, counterfactual) as report.row_of reads them."""

    compared: int = 0
    zeros: int = 0
    ones: int = 0
    up: list = field(default_factory=list)
    down: list = field(default_factory=list)
    dp_sum: float = 0.0
    n_dp: int = 0
    newly_unparsed: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    missing: list = field(default_factory=list)
    original_not_parsed: int = 0
    before: int = 0
    after: int = 0
    calls: float = 0.0
    tokens: float = 0.0
    scored: int = 0

    def add(self, o: Compact | None, c: Compact | None, cid: str) -> None:
        """Count one pair (None: no verdict)."""
        parsed = o is not None and o[0] == "ok"
        self.original_not_parsed += not parsed
        if c is None:
            self.missing.append(cid)
            return
        if c[0] == "error":
            self.errors.append(cid)
        if parsed and c[0] == "unparsed":
            self.newly_unparsed.append(cid)
        if not parsed or c[0] != "ok":
            return
        self.compared += 1
        if o[1] == 0:
            self.zeros += 1
            if c[1] == 1:
                self.up.append(cid)
        elif o[1] == 1:
            self.ones += 1
            if c[1] == 0:
                self.down.append(cid)
        if o[2] is not None and c[2] is not None:
            self.dp_sum += c[2] - o[2]
            self.n_dp += 1
        self.before += o[3] is False
        self.after += c[3] is False


class OriginalVerdicts:
    """The originals' verdicts of the main verdict file `path` (last line per id, read line by line) as
    arrays by `Originals.ids.index`."""

    def __init__(self, originals, path: Path):
        n = len(originals.ids)
        self.originals = originals
        self.status = np.full(n, -1, dtype=np.int8)
        self.score = np.full(n, -1, dtype=np.int8)
        self.p = np.full(n, np.nan)
        self.evidence = np.full(n, -1, dtype=np.int8)
        self.calls, self.tokens = np.zeros(n), np.zeros(n)
        for _, i, d in iter_lines(path):
            k = originals.ids.index(i)
            if k < 0:
                continue
            s, score, p, ev = compact(d)
            self.status[k] = STATUS.get(s, 0)
            self.score[k] = score if score in (0, 1) else -1
            self.p[k] = np.nan if p is None else p
            self.evidence[k] = -1 if ev is None else int(bool(ev))
            self.calls[k], self.tokens[k] = d.get("cost_calls") or 0.0, d.get("cost_tokens") or 0.0

    def get(self, i: str) -> Compact | None:
        k = self.originals.ids.index(i)
        if k < 0 or self.status[k] < 0:
            return None
        p, ev, score = self.p[k], self.evidence[k], self.score[k]
        return (NAMES[int(self.status[k])], None if score < 0 else int(score), None if math.isnan(p) else float(p),
                None if ev < 0 else bool(ev))


def count_pairs(verdict_file: Path, cf_file: Path, name: str, originals: OriginalVerdicts) -> PairCounts:
    """Perturbation `name`'s pairs: its counterfactuals' verdict lines of `verdict_file` (the last per id,
    each compared with its original's), then its counterfactuals in `cf_file` without a verdict, every
    id list in the data's order."""
    ids, counts = IdBuilder(), PairCounts()
    for d in iter_last_lines(verdict_file, repair=False):  # a retried error: its last line counts, once
        i = str(d["id"])
        if split_id(i)[1] == name:
            ids.add(i)
            counts.add(originals.get(split_id(i)[0]), compact(d), i)
            counts.scored += 1
            counts.calls += d.get("cost_calls") or 0.0
            counts.tokens += d.get("cost_tokens") or 0.0
    seen = ids.freeze()
    place: dict[str, int] = {}
    listed = {*counts.up, *counts.down, *counts.newly_unparsed, *counts.errors}
    with open(cf_file, encoding="utf-8") as fh:
        for k, record in json_lines(fh, cf_file):
            i = str(record["id"])
            if split_id(i)[1] != name:
                continue
            if i in listed:
                place[i] = k
            if i not in seen:
                counts.add(originals.get(split_id(i)[0]), None, i)
    for key in ("up", "down", "newly_unparsed", "errors"):
        getattr(counts, key).sort(key=lambda i: place.get(i, -1))
    return counts

