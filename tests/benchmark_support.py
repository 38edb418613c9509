"""The list-based front of evaluation/benchmark_figures.py that only the tests use: the figures of
plain lists of predictions (None: unparsed), labels and platforms, with an explicit unparsed policy."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptrubric_local.evaluation.benchmark_figures import (
    BOOTSTRAP,
    SEED,
    cells,
    counts,
    figures_of_cells,
    figures_of_counts,
)

UNPARSED_POLICIES = ("fail", "drop")
NO_PLATFORM = "(none)"


def _as_binary(values: Sequence[Any], what: str, allow_none: bool) -> tuple[np.ndarray, np.ndarray]:
    """(0/1 int array with None as 0, mask of the None entries); ValueError naming a bad entry."""
    out, missing = np.zeros(len(values), dtype=np.int64), np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        if v is None and allow_none:
            missing[i] = True
        elif isinstance(v, (bool, int, np.integer)) and int(v) in (0, 1):
            out[i] = int(v)
        else:
            raise ValueError(f"{what}[{i}] must be 0 or 1{' (or None: unparsed)' if allow_none else ''}, got {v!r}")
    return out, missing


def prepare(predictions: Sequence[Any], labels: Sequence[Any], platforms: Sequence[Any] | None = None,
            unparsed: str = "fail") -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(predictions, labels, platforms, n_unparsed) as arrays, with unparsed verdicts applied as
    `unparsed` says ("fail": predicted 0; "drop": left out)."""
    if unparsed not in UNPARSED_POLICIES:
        raise ValueError(f"unparsed must be one of {', '.join(UNPARSED_POLICIES)}, got {unparsed!r}")
    if len(predictions) != len(labels) or (platforms is not None and len(platforms) != len(labels)):
        raise ValueError("predictions, labels and platforms must have one entry per trajectory: got "
                         f"{len(predictions)}, {len(labels)}, {len(platforms) if platforms is not None else '-'}")
    pred, none = _as_binary(predictions, "predictions", allow_none=True)
    label, _ = _as_binary(labels, "labels", allow_none=False)
    plat = np.array([NO_PLATFORM if p is None else str(p) for p in (platforms or [None] * len(label))], dtype=object)
    keep = ~none if unparsed == "drop" else np.ones(len(label), dtype=bool)
    return pred[keep], label[keep], plat[keep], int(none.sum())


def point_figures(pred: np.ndarray, label: np.ndarray) -> dict[str, float | None]:
    """`figures_of_counts` of 0/1 arrays."""
    return figures_of_counts(counts(pred, label))


def benchmark_figures(predictions: Sequence[Any], labels: Sequence[Any], platforms: Sequence[Any] | None = None,
                      *, unparsed: str = "fail", n_boot: int = BOOTSTRAP, seed: int = SEED, confidence: float = 0.95,
                      platform_order: Sequence[str] = ()) -> dict[str, Any]:
    """All the figures, as one JSON-ready dict:

    `overall` (every HEADLINE figure and `rate_gap`), `intervals` (a [low, high] per HEADLINE figure,
    None when undefined or `n_boot` is 0), `platforms` ({name: {n, acc, prec, rec, f1}}: those of
    `platform_order` that occur, in that order (the paper's is Ubuntu, Mobile, Windows, macOS, Web), then
    the others in order of first appearance), `counts` (tp/fp/tn/fn),
    `n` (trajectories in the figures), `n_unparsed` (predictions that were None), `unparsed` (the policy
    applied to them), and the bootstrap's `n_boot`, `seed`, `confidence`."""
    pred, label, plat, n_unparsed = prepare(predictions, labels, platforms, unparsed)
    names = list(dict.fromkeys(plat.tolist()))
    code = np.array([names.index(p) for p in plat.tolist()], dtype=np.int64) if len(plat) else np.zeros(0, np.int64)
    return figures_of_cells(cells(pred, label, code, len(names)), names, n_unparsed=n_unparsed,
                            unparsed=unparsed, n_boot=n_boot, seed=seed, confidence=confidence,
                            platform_order=platform_order)


