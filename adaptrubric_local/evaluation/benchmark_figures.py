"""The figures reward benchmarks report, from predictions, labels and platforms: Table 1 of the paper
(Acc and F1 per platform; overall Acc, Precision, Recall, F1), CUARewardBench's NPV and TNR,
Online-Mind2Web's judged and labelled success rates and their gap, Cohen's kappa and MCC, and a seeded
percentile bootstrap interval beside each overall figure. Every figure is a function of the four
confusion counts, so the resamples are drawn as multinomial counts (`numpy.random.default_rng(seed)`):
exactly row resampling's distribution, in O(n_boot) memory whatever n.

Ratios are percentages; kappa and MCC lie in [-1, 1]; an undefined figure is None, never 0. F1 is
2TP / (2TP + FP + FN) where precision and recall are both defined, else None. `rates` is the one
implementation of Acc / Prec / Rec / F1 / FPR, `cells` the one confusion counter (metrics.py's too).
`of_rows` takes a verdict table's columns, where unparsed, error and missing verdicts are predicted
failures (counted: `n_unparsed`) and unlabelled rows are left out. Knows nothing about verdict files,
models or the CLI.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .verdict_table import OK, Rows

BOOTSTRAP, SEED = 1000, 0  # `eval`'s resamples and seed for the intervals (--bootstrap, --seed)
CELLS = ("tp", "fp", "tn", "fn")
HEADLINE = ("acc", "prec", "rec", "f1", "npv", "tnr", "kappa", "mcc", "judged_rate", "labelled_rate")
NAMES = {"acc": "Acc", "prec": "Prec", "rec": "Rec", "f1": "F1", "npv": "NPV", "tnr": "TNR",
         "kappa": "Cohen's kappa", "mcc": "MCC", "judged_rate": "Judged success rate",
         "labelled_rate": "Labelled success rate"}
UNKNOWN = "unknown"  # a table row's platform when its data said none (as metrics.by_platform names it)


def cells(pred, label, code: np.ndarray | None = None, n_codes: int = 1, weights=None) -> np.ndarray:
    """(n_codes, 4) confusion counts (CELLS order) of predictions and 0/1 labels, by a code per row (none:
    one row); `weights`: how many trajectories each row stands for. The one confusion counter: a
    prediction that is neither 0 nor 1 (an ok verdict without a score, in metrics.py's `scored_only`) is
    wrong and not a positive, so an FN whatever its label."""
    pred, label = np.asarray(pred), np.asarray(label)
    cell = np.where(pred == 1, np.where(label == 1, 0, 1), np.where(label == pred, 2, 3))
    code = np.zeros(len(cell), np.int64) if code is None else np.asarray(code, np.int64)
    found = np.bincount(code * 4 + cell, weights=weights, minlength=4 * n_codes)
    return found.astype(np.int64).reshape(n_codes, 4)


def counts(pred, label, weights=None) -> dict[str, int]:
    """tp / fp / tn / fn of predictions and 0/1 labels (`cells`)."""
    return dict(zip(CELLS, map(int, cells(pred, label, weights=weights)[0])))


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
    mcc = _div(tp * tn - fp * fn, np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)), 1.0)
    f1 = np.where((tp + fp > 0) & (tp + fn > 0), _div(2 * tp, 2 * tp + fp + fn), np.nan)
    return {"acc": _div(tp + tn, n), "prec": _div(tp, tp + fp), "rec": _div(tp, tp + fn), "f1": f1,
            "npv": _div(tn, tn + fn), "tnr": _div(tn, tn + fp), "fpr": _div(fp, fp + tn),
            "kappa": _div(po - pe, 1 - pe, 1.0), "mcc": mcc, "judged_rate": _div(tp + fp, n),
            "labelled_rate": _div(tp + fn, n)}


def _value(x: Any) -> float | None:
    x = float(x)
    return None if np.isnan(x) else x


def rates(c: dict[str, int]) -> dict[str, float | None]:
    """Acc / Prec / Rec / F1 / FPR (percentages, None when undefined) of a confusion matrix."""
    figs = _figures(*(c[k] for k in CELLS))
    return {k: _value(figs[k]) for k in ("acc", "prec", "rec", "f1", "fpr")}


def figures_of_counts(c: dict[str, int]) -> dict[str, float | None]:
    """Every figure of HEADLINE of a confusion matrix, plus `rate_gap` (judged minus labelled success rate)."""
    out = {k: _value(v) for k, v in _figures(*(c[k] for k in CELLS)).items() if k in HEADLINE}
    both = out["judged_rate"] is not None and out["labelled_rate"] is not None
    out["rate_gap"] = out["judged_rate"] - out["labelled_rate"] if both else None
    return out


def bootstrap_intervals(c: dict[str, int], n_boot: int = 1000, seed: int = 0,
                        confidence: float = 0.95) -> dict[str, tuple[float, float] | None]:
    """Percentile bootstrap interval of every HEADLINE figure of confusion matrix `c`: `n_boot` multinomial
    resamples of its counts from `seed`; a figure undefined in a resample is left out of that one, and
    one undefined in every resample (or with n_boot 0) has None."""
    if n_boot < 0 or not 0 < confidence < 1:
        raise ValueError(f"n_boot must be >= 0 and confidence in (0, 1), got {n_boot} and {confidence}")
    cells = np.array([c[k] for k in CELLS], dtype=np.int64)
    n = int(cells.sum())
    if n == 0 or n_boot == 0:
        return dict.fromkeys(HEADLINE)
    draws = np.random.default_rng(seed).multinomial(n, cells / n, size=n_boot)  # (n_boot, 4) counts
    figs = _figures(*draws.T)
    tail = 100 * (1 - confidence) / 2
    out: dict[str, tuple[float, float] | None] = {}
    for name in HEADLINE:
        vals = figs[name][~np.isnan(figs[name])]
        out[name] = (float(np.percentile(vals, tail)), float(np.percentile(vals, 100 - tail))) if len(vals) else None
    return out


def figures_of_cells(cells: np.ndarray, names: Sequence[str], *, n_unparsed: int, unparsed: str = "fail",
                     n_boot: int = 1000, seed: int = 0, confidence: float = 0.95,
                     platform_order: Sequence[str] = ()) -> dict[str, Any]:
    """The figures as one JSON-ready dict, from per-platform confusion counts (`cells`: a row of CELLS
    counts per name of `names`; a name may repeat, its rows are added): `overall` (every HEADLINE figure
    and `rate_gap`), `intervals` ([low, high] per HEADLINE figure, None when undefined or `n_boot` is 0),
    `platforms` ({name: {n, acc, prec, rec, f1}}: those of `platform_order` first, in that order, then
    the others as they come), `counts`, `n`, `n_unparsed`, `unparsed` (the policy applied to them) and the
    bootstrap's `n_boot`, `seed`, `confidence`."""
    merged: dict[str, np.ndarray] = {}
    for name, row in zip(names, cells):
        merged[name] = merged.get(name, 0) + row
    total = {k: int(sum(r[i] for r in merged.values())) for i, k in enumerate(CELLS)}
    order = [*(p for p in platform_order if p in merged), *(p for p in merged if p not in platform_order)]
    per_platform = {}
    for name in order:
        c = dict(zip(CELLS, map(int, merged[name])))
        if sum(c.values()):
            per_platform[name] = {"n": sum(c.values()), **rates(c)}
            del per_platform[name]["fpr"]
    intervals = bootstrap_intervals(total, n_boot, seed, confidence)
    return {"overall": figures_of_counts(total), "intervals": {k: list(v) if v else None for k, v in intervals.items()},
            "platforms": per_platform, "counts": total, "n": sum(total.values()), "n_unparsed": n_unparsed,
            "unparsed": unparsed, "n_boot": n_boot, "seed": seed, "confidence": confidence}


def of_rows(rows: Rows, platforms: dict[str | None, int], *, n_boot: int = BOOTSTRAP, seed: int = SEED,
            confidence: float = 0.95, platform_order: Sequence[str] = ()) -> dict[str, Any]:
    """The figures of a verdict table's labelled rows (`platforms`: name -> code of its platform column),
    with unparsed, error and missing verdicts as predicted failures (metrics.py's headline); `n_unparsed`
    counts them and `unlabelled` the rows left out for want of a label. Column arithmetic only."""
    labelled = rows["label"] >= 0
    every = bool(labelled.all())  # no copy of the columns then
    status, score, label, code = (rows[k] if every else rows[k][labelled] for k in ("status", "score", "label", "platform"))
    answered = (status == OK) & (score >= 0)
    pred = np.where(answered, score, 0)
    names = [UNKNOWN] * (max(platforms.values(), default=-1) + 1)
    for name, at in platforms.items():
        names[at] = name or UNKNOWN
    out = figures_of_cells(cells(pred, label, code, len(names)), names,
                           n_unparsed=int((~answered).sum()), n_boot=n_boot, seed=seed, confidence=confidence,
                           platform_order=platform_order)
    out["unlabelled"] = int((~labelled).sum())
    return out


def _fmt(x: float | None, name: str = "acc") -> str:
    return "n/a" if x is None else f"{x:.3f}" if name in ("kappa", "mcc") else f"{x:.1f}"


def md_row(*cells) -> str:
    """A markdown table row (report.py's and vote_rules.py's tables too)."""
    return "| " + " | ".join(map(str, cells)) + " |"


def md_head(*names: str, left: int = 0) -> list[str]:
    """A markdown table's header row and rule: the first `left` columns left-aligned, the others right."""
    return [md_row(*names), "|" + "|".join(["---"] * left + ["---:"] * (len(names) - left)) + "|"]


def render_table(figs: dict[str, Any]) -> str:
    """The figures as text a person reads: Table 1's row (Acc and F1 per platform, overall Acc, Prec,
    Rec, F1), then every headline figure with its bootstrap interval, then how unparsed verdicts were
    counted. Markdown tables; undefined figures read "n/a"."""
    plats, o = figs["platforms"], figs["overall"]
    head = [*(f"{p} Acc | {p} F1" for p in plats), "Overall Acc | Overall Prec | Overall Rec | Overall F1"]
    cells = [*(f"{_fmt(v['acc'])} | {_fmt(v['f1'])}" for v in plats.values()),
             " | ".join(_fmt(o[k]) for k in ("acc", "prec", "rec", "f1"))]
    lines = ["Table 1 layout (percent)", "", md_row(*head), md_row(*["---"] * (2 * len(plats) + 4)), md_row(*cells), "",
             "n per platform: " + ", ".join(f"{p} {v['n']}" for p, v in plats.items()), ""]
    lines += [md_row("figure", "value", f"{round(100 * figs['confidence'])}% interval"), md_row("---", "---", "---")]
    for k in HEADLINE:
        iv = figs["intervals"][k]
        shown = f"[{_fmt(iv[0], k)}, {_fmt(iv[1], k)}]" if iv else ("n/a" if figs["n_boot"] else "-")
        lines.append(md_row(NAMES[k], _fmt(o[k], k), shown))
    lines.append(md_row("Judged - labelled success rate", _fmt(o["rate_gap"]), ""))
    c = figs["counts"]
    what = "counted as predicted failures" if figs["unparsed"] == "fail" else "left out of every figure"
    boot = (f"{figs['n_boot']} resamples (multinomial over the confusion counts), seed {figs['seed']}"
            if figs["n_boot"] else "off")
    lines += ["", f"n = {figs['n']} (TP {c['tp']}, FP {c['fp']}, TN {c['tn']}, FN {c['fn']}); "
              f"unparsed/error/missing verdicts: {figs['n_unparsed']}, {what}; bootstrap: {boot}"]
    return "\n".join(lines) + "\n"


__all__ = ["BOOTSTRAP", "CELLS", "HEADLINE", "SEED", "bootstrap_intervals", "cells", "counts", "figures_of_cells",
           "figures_of_counts", "of_rows", "rates", "render_table"]
