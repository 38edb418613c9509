"""The figures reward benchmarks report, from plain arrays of predictions, labels and platforms.

- Table 1 of the paper (OGRBench): Acc and F1 per platform; overall Acc, Precision, Recall, F1.
- CUARewardBench's ORM figures: NPV (TN / (TN + FN)) and TNR (TN / (TN + FP)).
- Online-Mind2Web: the success rate the verifier judges (predicted 1 / n) against the labelled one
  (label 1 / n), and their gap.
- Agreement beyond chance: Cohen's kappa and the Matthews correlation coefficient (MCC).
- A seeded percentile bootstrap interval (95% by default) beside each overall figure: trajectories are
  resampled with replacement `n_boot` times from `numpy.random.default_rng(seed)`, so one seed gives one
  interval on every machine.

Ratios are percentages; kappa and MCC lie in [-1, 1]. An undefined figure (no predicted positive for
precision, one class only for MCC, ...) is None, never 0. F1 is 2TP / (2TP + FP + FN), the harmonic
mean of precision and recall wherever both are defined.

Unparsed verdicts (a prediction of None) are never silently a 0 or a 1: they are counted (`n_unparsed`,
shown by `render_table`), and `unparsed` says what they become, explicitly: "fail" counts each as a
predicted failure (the paper's fixed denominators; the default, as in `evaluation/metrics.py`), "drop"
leaves them out of every figure. Labels must be 0 or 1: a trajectory without a label has no place here.

Pure functions: knows nothing about verdict files, models or the CLI (`eval` wires them in).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

UNPARSED_POLICIES = ("fail", "drop")
HEADLINE = ("acc", "prec", "rec", "f1", "npv", "tnr", "kappa", "mcc", "judged_rate", "labelled_rate")
NAMES = {"acc": "Acc", "prec": "Prec", "rec": "Rec", "f1": "F1", "npv": "NPV", "tnr": "TNR",
         "kappa": "Cohen's kappa", "mcc": "MCC", "judged_rate": "Judged success rate",
         "labelled_rate": "Labelled success rate"}
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


def counts(pred: np.ndarray, label: np.ndarray) -> dict[str, int]:
    """tp / fp / tn / fn of 0/1 arrays."""
    pred, label = np.asarray(pred, dtype=bool), np.asarray(label, dtype=bool)
    return {"tp": int((pred & label).sum()), "fp": int((pred & ~label).sum()),
            "tn": int((~pred & ~label).sum()), "fn": int((~pred & label).sum())}


def _div(num: np.ndarray, den: np.ndarray, scale: float = 100.0) -> np.ndarray:
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, scale * num / np.where(den > 0, den, 1.0), np.nan)


def _figures(tp, fp, tn, fn) -> dict[str, np.ndarray]:
    """Every figure of HEADLINE from count arrays (NaN where undefined); vectorised for the bootstrap."""
    tp, fp, tn, fn = (np.asarray(x, dtype=float) for x in (tp, fp, tn, fn))
    n = tp + fp + tn + fn
    po = _div(tp + tn, n, 1.0)
    pe = _div((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn), n * n, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(pe < 1, (po - pe) / np.where(pe < 1, 1 - pe, 1.0), np.nan)
        den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        mcc = np.where(den > 0, (tp * tn - fp * fn) / np.where(den > 0, den, 1.0), np.nan)
    return {"acc": _div(tp + tn, n), "prec": _div(tp, tp + fp), "rec": _div(tp, tp + fn),
            "f1": _div(2 * tp, 2 * tp + fp + fn), "npv": _div(tn, tn + fn), "tnr": _div(tn, tn + fp),
            "kappa": kappa, "mcc": mcc, "judged_rate": _div(tp + fp, n), "labelled_rate": _div(tp + fn, n)}


def _value(x: Any) -> float | None:
    x = float(x)
    return None if np.isnan(x) else x


def point_figures(pred: np.ndarray, label: np.ndarray) -> dict[str, float | None]:
    """Every figure of HEADLINE for 0/1 arrays, plus `rate_gap` (judged minus labelled success rate)."""
    c = counts(pred, label)
    out = {k: _value(v) for k, v in _figures(c["tp"], c["fp"], c["tn"], c["fn"]).items()}
    both = out["judged_rate"] is not None and out["labelled_rate"] is not None
    out["rate_gap"] = out["judged_rate"] - out["labelled_rate"] if both else None
    return out


def bootstrap_intervals(pred: np.ndarray, label: np.ndarray, n_boot: int = 1000, seed: int = 0,
                        confidence: float = 0.95) -> dict[str, tuple[float, float] | None]:
    """Percentile bootstrap interval of every HEADLINE figure: resample the trajectories with
    replacement `n_boot` times (numpy's default_rng(seed)); a resample where a figure is undefined is
    left out of that figure's interval, and a figure undefined in every resample has None."""
    if n_boot < 1 or not 0 < confidence < 1:
        raise ValueError(f"n_boot must be >= 1 and confidence in (0, 1), got {n_boot} and {confidence}")
    pred, label = np.asarray(pred, dtype=bool), np.asarray(label, dtype=bool)
    if len(pred) == 0:
        return dict.fromkeys(HEADLINE)
    idx = np.random.default_rng(seed).integers(0, len(pred), size=(n_boot, len(pred)))
    p, y = pred[idx], label[idx]
    figs = _figures((p & y).sum(1), (p & ~y).sum(1), (~p & ~y).sum(1), (~p & y).sum(1))
    tail = 100 * (1 - confidence) / 2
    out: dict[str, tuple[float, float] | None] = {}
    for name in HEADLINE:
        vals = figs[name][~np.isnan(figs[name])]
        out[name] = (float(np.percentile(vals, tail)), float(np.percentile(vals, 100 - tail))) if len(vals) else None
    return out


def benchmark_figures(predictions: Sequence[Any], labels: Sequence[Any], platforms: Sequence[Any] | None = None,
                      *, unparsed: str = "fail", n_boot: int = 1000, seed: int = 0, confidence: float = 0.95,
                      platform_order: Sequence[str] = ()) -> dict[str, Any]:
    """All the figures, as one JSON-ready dict:

    `overall` (every HEADLINE figure and `rate_gap`), `intervals` (a [low, high] per HEADLINE figure),
    `platforms` ({name: {n, acc, f1, prec, rec}}: those of `platform_order` that occur, in that order (the
    paper's is Ubuntu, Mobile, Windows, macOS, Web), then the others in order of first appearance),
    `counts` (tp/fp/tn/fn),
    `n` (trajectories in the figures), `n_unparsed` (predictions that were None), `unparsed` (the policy
    applied to them), and the bootstrap's `n_boot`, `seed`, `confidence`."""
    pred, label, plat, n_unparsed = prepare(predictions, labels, platforms, unparsed)
    per_platform = {}
    seen = dict.fromkeys(plat.tolist())
    for name in [*(p for p in platform_order if p in seen), *(p for p in seen if p not in platform_order)]:
        mask = plat == name
        figs = point_figures(pred[mask], label[mask])
        per_platform[name] = {"n": int(mask.sum()), **{k: figs[k] for k in ("acc", "f1", "prec", "rec")}}
    intervals = bootstrap_intervals(pred, label, n_boot, seed, confidence)
    return {"overall": point_figures(pred, label), "intervals": {k: list(v) if v else None for k, v in intervals.items()},
            "platforms": per_platform, "counts": counts(pred, label), "n": len(pred), "n_unparsed": n_unparsed,
            "unparsed": unparsed, "n_boot": n_boot, "seed": seed, "confidence": confidence}


def _fmt(x: float | None, name: str = "acc") -> str:
    if x is None:
        return "n/a"
    return f"{x:.3f}" if name in ("kappa", "mcc") else f"{x:.1f}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render_table(figs: dict[str, Any]) -> str:
    """The figures as text a person reads: Table 1's row (Acc and F1 per platform, overall Acc, Prec,
    Rec, F1), then every headline figure with its bootstrap interval, then how unparsed verdicts were
    counted. Markdown tables; undefined figures read "n/a"."""
    plats, o = figs["platforms"], figs["overall"]
    head = [*(f"{p} Acc | {p} F1" for p in plats), "Overall Acc | Overall Prec | Overall Rec | Overall F1"]
    cells = [*(f"{_fmt(v['acc'])} | {_fmt(v['f1'])}" for v in plats.values()),
             " | ".join(_fmt(o[k]) for k in ("acc", "prec", "rec", "f1"))]
    ncols = 2 * len(plats) + 4
    lines = ["Table 1 layout (percent)", "", _row(head), _row(["---"] * ncols), _row(cells), "",
             "n per platform: " + ", ".join(f"{p} {v['n']}" for p, v in plats.items()), ""]
    pct = round(100 * figs["confidence"])
    lines += [_row(["figure", "value", f"{pct}% interval"]), _row(["---"] * 3)]
    for k in HEADLINE:
        iv = figs["intervals"][k]
        lines.append(_row([NAMES[k], _fmt(o[k], k), f"[{_fmt(iv[0], k)}, {_fmt(iv[1], k)}]" if iv else "n/a"]))
    lines.append(_row(["Judged - labelled success rate", _fmt(o["rate_gap"]), ""]))
    c = figs["counts"]
    what = "counted as predicted failures" if figs["unparsed"] == "fail" else "left out of every figure"
    lines += ["", f"n = {figs['n']} (TP {c['tp']}, FP {c['fp']}, TN {c['tn']}, FN {c['fn']}); "
              f"unparsed verdicts: {figs['n_unparsed']}, {what}; bootstrap: {figs['n_boot']} resamples, "
              f"seed {figs['seed']}"]
    return "\n".join(lines) + "\n"


__all__ = ["HEADLINE", "UNPARSED_POLICIES", "benchmark_figures", "bootstrap_intervals", "counts", "point_figures",
           "prepare", "render_table"]
