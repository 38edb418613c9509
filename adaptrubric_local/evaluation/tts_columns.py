"""`tts` over a large run in memory that grows with the candidates, not with their text: the verdict file
and the data are read line by line (the data through `LabelledStream`, its labels files applied as it
passes) into columns of what the curves need, about 55 bytes a candidate: the id's UTF-8 bytes with where
they lie, its 16-byte digest, status, score, label, the two probabilities, hit_cap/hit_context (the
classification counts them) and a task code. The task key is the one `coverage.label_from` gives: the
data's task_id, or "instruction: " and the instruction when the record has none (kept as its digest, one
per task); without a data set, the verdicts' own task_id and labels. Coverage is `columns.align`'s (the
same rules and messages as coverage.py), with the task code carried where it carries the platform code.

The candidates of one task at a time are then made into small records, sorted by id and shuffled as
`tts.groups` does, and tallied (`tts.over_tasks`): a test checks the tts.json of this path equals the
object path's on the same files. Knows nothing about plots, reports or argument parsing.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..formats.ids import digest
from ..labelled_stream import LabelledStream
from . import columns as CL
from . import tts as T
from .columns import STATUSES, Columns
from .image_roots import outside_image_roots


@dataclass(slots=True)
class Candidate:
    """One candidate as the protocols read it (the Verdict fields of tts.py)."""

    id: str
    label: int
    status: str
    score: int | None
    p_success: float | None
    p_success_calibrated: float | None


class CandidateColumns(Columns):
    """`Columns` of what the curves read; `platform` holds the task code (`no_task`: none), `at`/`size`
    where each id's UTF-8 bytes lie in `names`."""

    FIELDS: ClassVar[dict[str, str]] = {"status": "b", "score": "b", "label": "b", "platform": "i", "p": "d",
                                        "pcal": "d", "cap": "b", "ctx": "b", "at": "q", "size": "i"}

    def __init__(self):
        super().__init__()
        self.names = bytearray()
        self.no_task = self.code(None)

    def add_more(self, d: dict) -> None:
        """Where the line's id lies in `names` (`add`'s platform column holds the task key's code)."""
        at, size = self.put_name(str(d["id"]))
        self.cols["at"].append(at)
        self.cols["size"].append(size)

    def put_name(self, i: str) -> tuple[int, int]:
        """Keep an id's bytes; where they lie (`at`, `size`)."""
        raw = i.encode("utf-8", "surrogatepass")
        at = len(self.names)
        self.names += raw
        return at, len(raw)

    def name(self, at: int, size: int) -> str:
        return self.names[at:at + size].decode("utf-8", "surrogatepass")


def task_key(key: str) -> bytes:
    """The digest a task key is kept under."""
    return digest(key)


def data_task(t) -> str:
    """A trajectory's task key (coverage.label_from's task_id): its task_id, else its instruction."""
    return t.task_id or f"instruction: {t.instruction}"


def read_verdicts(path: Path) -> tuple[dict[str, np.ndarray], CandidateColumns]:
    """The verdict file's last line per id as columns (`columns.read_verdicts`, with the task and id)."""
    def task(d: dict) -> bytes | None:
        return None if d.get("task_id") is None else task_key(str(d["task_id"]))

    return CL.read_verdicts(path, CandidateColumns(), task)


def read_data(src: LabelledStream, cols: CandidateColumns) -> dict:
    """`columns.read_data`'s dict from the labelled stream, the task code where it has the platform's."""
    return CL.read_stream(src, cols.sorted_keys, lambda x: cols.code(task_key(data_task(x))))


def candidates(path: Path, src: LabelledStream | None, subset: str, allow_extra: bool,
               check_outside: Callable[[list, int], None] | None = None):
    """(the rows to tally, their Coverage, the columns reader): coverage.align's verdicts as columns.
    `check_outside(errors, records)` is called after the data is read, before coverage is decided."""
    v, cols = read_verdicts(path)
    d = read_data(src, cols) if src is not None else None
    if d is not None and check_outside is not None:
        check_outside(d["outside"], d["records"])
    rows, cov = CL.align(path, v, d, subset, allow_extra, str(src.data) if src is not None else None)
    if d is not None and subset == "data" and d["missing"]:  # the stand-ins' ids, after the rows align kept
        k = len(rows["key"]) - len(d["missing"])
        for j, i in enumerate(d["missing"], start=k):
            rows["at"][j], rows["size"][j] = cols.put_name(i)
    return rows, cov, cols


def task_lists(rows: dict[str, np.ndarray], cols: CandidateColumns,
               seed: int | None = T.SEED) -> tuple[int, Iterator[list[Candidate]]]:
    """(the most candidates of a task, each task's labelled candidates in `tts.groups`' order, one task at
    a time)."""
    keep = np.flatnonzero((rows["label"] >= 0) & (rows["platform"] != cols.no_task))
    order = keep[np.argsort(rows["platform"][keep], kind="stable")]
    codes = rows["platform"][order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else np.zeros(0, np.int64)
    ends = np.r_[starts[1:], len(codes)] if len(codes) else starts
    most = int((ends - starts).max()) if len(starts) else 0

    def one(r: int) -> Candidate:
        p, pc, score = rows["p"][r], rows["pcal"][r], int(rows["score"][r])
        return Candidate(cols.name(int(rows["at"][r]), int(rows["size"][r])), int(rows["label"][r]),
                         STATUSES[rows["status"][r]], None if score < 0 else score,
                         None if np.isnan(p) else float(p), None if np.isnan(pc) else float(pc))

    def tasks() -> Iterator[list[Candidate]]:
        for a, b in zip(starts.tolist(), ends.tolist()):
            cands = sorted((one(int(r)) for r in order[a:b]), key=lambda c: c.id)
            if seed is not None:
                random.Random(seed).shuffle(cands)
            yield cands

    return most, tasks()


def curves(verdicts_path: str | Path, src: LabelledStream | None, max_n: int | None = None,
           seed: int | None = T.SEED, subset: str = "data", allow_extra: bool = False,
           check_outside: Callable[[list, int], None] | None = None) -> tuple[dict, CandidateColumns]:
    """(tts.json's content less its run record, the columns reader: models and banks)."""
    rows, cov, cols = candidates(Path(verdicts_path), src, subset, allow_extra, check_outside)
    most, tasks = task_lists(rows, cols, seed)
    if not most:
        raise ValueError(T.NO_TASKS)
    res = T.over_tasks(tasks, max_n or most)
    lab = rows["label"] >= 0
    res["classification"] = CL.classification({k: rows[k][lab] for k in ("status", "label", "score", "cap", "ctx")})
    res["coverage"] = cov.to_dict()
    return res, cols


def result(verdicts_path: str | Path, data, src: LabelledStream | None, max_n: int | None, seed: int | None,
           subset: str, allow_extra: bool, labels: dict | None) -> tuple[dict, list, dict | None]:
    """(tts.json's content less its run record, stand-in verdicts for its models and banks, the labels
    record) for `harness.run_tts`; `src` is made from `data` when not given; a copy read without its
    --image-root stops (image_roots.py), after the data is read."""
    from types import SimpleNamespace

    from ..types import Verdict

    if src is None and data is not None:
        src = LabelledStream(data)

    def check_outside(errors: list, total: int) -> None:
        outside_image_roots(SimpleNamespace(errors=errors, trajectories=range(total - len(errors))), data)

    res, cols = curves(verdicts_path, src, max_n, seed, subset, allow_extra, check_outside)
    if src is not None and src.files:
        labels = src.applied().record()
    return res, [Verdict(model=md, bank_sha=b) for md in cols.models for b in cols.banks], labels
