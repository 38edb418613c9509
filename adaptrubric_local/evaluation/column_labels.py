"""Labels files (labels.py) put on what evaluation/columns.py's `read_data` holds of a data set: the labels
beside the verdicts' id digests and those of the trajectories without a verdict. The rules are
`labels.apply_labels`'s: files in order, a later file's 0/1 wins per id, an unsure line leaves the data's
label; an id that is neither a trajectory of the data nor one of its records that did not load is a
LabelsError naming the file, line and id; the ids of records that did not load are counted
(`not_loaded`), never labelled. What it returns is the same `AppliedLabels` record, so run records,
calibration files and the terminal say the same as on the path that loads every trajectory.

Memory grows with the labels files (their lines, read whole by `read_labels`), not with the data or the
verdict file: the ids are looked up by binary search among the digests `read_data` already holds. Knows
nothing about metrics, verdict files or argument parsing.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..formats.ids import DIGEST, digest
from ..labels import AppliedLabels, LabelsFile, merged_labels, read_labels, unknown_ids


def read(paths: Iterable[str | Path]) -> list[LabelsFile]:
    """The labels files, read and checked (a bad line stops here, before the data is read)."""
    return [read_labels(p) for p in paths]


def _keys(ids: list[str]) -> np.ndarray:
    return np.array([digest(i).rstrip(b"\0") for i in ids], dtype=f"S{DIGEST}")


def _find(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(whether each of `keys` is in `sorted_keys`, its position there)."""
    if not len(sorted_keys):
        return np.zeros(len(keys), bool), np.zeros(len(keys), np.int64)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys, at


def apply(files: list[LabelsFile], d: dict, data_name: str = "the data") -> AppliedLabels:
    """Put the labels of `files` on `d` (read_data's result: `label` of the verdicts' ids, `missing_labels`
    of the trajectories without a verdict) in place; returns what was done."""
    applied = AppliedLabels(files=[f.provenance for f in files])
    if not files:
        return applied
    merged = merged_labels(files)
    ids = list(merged)
    keys = _keys(ids)
    found, at = _find(d["have"], keys)
    with_verdict = found.copy()
    with_verdict[found] = d["in"][at[found]]  # a verdict's id the data holds
    missing = _keys(d["missing"])
    order = np.argsort(missing, kind="stable")
    in_missing, pos = _find(missing[order], keys)
    del missing
    bad = set(d["bad"])
    good = with_verdict | in_missing
    unknown = {ids[k] for k in np.flatnonzero(~good) if ids[k] not in bad}
    for f in files:
        named = [i for i in f.records if i in unknown]
        if named:
            raise unknown_ids(f, named, data_name)
    for k, i in enumerate(ids):
        if not good[k]:
            applied.not_loaded.append(i)
            continue
        if with_verdict[k]:
            _relabel(applied, merged[i], d["label"], int(at[k]))
        else:
            _relabel(applied, merged[i], d["missing_labels"], int(order[pos[k]]))
    return applied


def _relabel(applied: AppliedLabels, label: int | None, labels, j: int) -> None:
    """Count and set one trajectory's label (`labels[j]`: -1 for none), as apply_labels does."""
    old = int(labels[j])
    applied.count(None if old < 0 else old, label)
    if label is not None:
        labels[j] = label
