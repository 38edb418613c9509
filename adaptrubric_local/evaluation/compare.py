"""`adaptrubric compare`: two result folders (eval, tts or ablate) side by side, the settings their
run.json recorded and every metric with its difference, and for two eval folders their reliability
diagrams drawn together. Reads the files the harness wrote; knows nothing about scoring or models.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import report

COMPARED_SETTINGS = ("data", "model", "adapter", "bank_sha", "max_images", "max_visual_tokens", "router", "coarse",
                     "fine", "ablation", "package_version")


def _load_result(d: Path) -> tuple[dict, dict]:
    for name in ("metrics.json", "tts.json", "ablation.json"):
        if (d / name).is_file():
            return name, json.loads((d / name).read_text())
    raise ValueError(f"{d}: no metrics.json, tts.json or ablation.json (is it an eval/tts/ablate output folder?)")


def _flat(kind: str, obj: dict) -> dict[str, float]:
    out = {}
    if kind == "metrics.json":
        for scope, r in [("overall", obj["overall"]), *obj.get("per_platform", {}).items()]:
            keys = ("acc", "prec", "rec", "f1", "fpr", "acc_strict", "scored", "unparsed", "errors", "n") \
                if scope == "overall" else ("acc", "f1")
            out.update({f"{scope}.{k}": v for k, v in _headline_and_scored(r, keys).items()})
        out.update({f"efficiency.{k}": obj.get("efficiency", {}).get(k)
                    for k in ("calls_per_traj", "tokens_per_traj", "s_per_traj")})
        out.update({f"{field}.{k}": fig.get(k) for field, fig in (obj.get("probability") or {}).items()
                    for k in ("auroc", "auprc", "brier", "ece")})
    elif kind == "tts.json":
        out.update({f"{proto}@{n}": sr for proto in ("earlystop", "bestofn", "bestofn_soft", "random", "oracle")
                    for n, sr in obj[proto].items()})
        out.update({f"pool.{k}": obj.get("pool", {}).get(k)
                    for k in ("trial_sr", "oracle_at_max", "random_at_1_expected", "headroom", "mixed")})
    else:
        for name, row in obj["settings"].items():
            out.update({f"{name}.{k}": v for k, v in _headline_and_scored(row["overall"],
                                                                          ("acc", "f1", "unparsed", "errors")).items()})
    return out


def _headline_and_scored(r: dict, keys: tuple[str, ...]) -> dict:
    """Headline metrics and their `scored_only.` twins; a metrics.json written before the headline
    classified every trajectory held scored-only figures, so they are filed as such."""
    rates, scored = ("acc", "prec", "rec", "f1", "fpr"), r.get("scored_only")
    out = {k: r.get(k) for k in keys if scored is not None or k not in rates}
    out.update({f"scored_only.{k}": (r if scored is None else scored).get(k) for k in keys if k in rates})
    return out


def _number(x, sign: bool = False) -> str:
    """A compared figure: counts as integers (`10`), the rest with two decimals, '-' when missing."""
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:+d}" if sign else str(x)
    return report.fmt(x, 2, sign)


def compare(dir_a: str | Path, dir_b: str | Path, out: str | Path | None = None) -> str:
    """A plain-text table of the settings and metrics that differ between two result folders; with
    `out`, two eval folders' reliability diagrams drawn together into out/calibration.png."""
    (ka, a), (kb, b) = _load_result(Path(dir_a)), _load_result(Path(dir_b))
    if ka != kb:
        raise ValueError(f"cannot compare {ka} ({dir_a}) with {kb} ({dir_b})")
    if out is not None and ka == "metrics.json":
        Path(out).mkdir(parents=True, exist_ok=True)
        series = [(f"{tag}: {f}", s) for tag, obj in (("A", a), ("B", b))
                  for f, s in (obj.get("probability") or {}).items()]
        report.plot_reliability(series, Path(out) / "calibration.png", f"Reliability: A = {dir_a}, B = {dir_b}")
    ra, rb = a.get("run", {}), b.get("run", {})
    lines = [f"{'setting':<22}{'A':<40}{'B':<40}"]
    for k in COMPARED_SETTINGS:
        va, vb = ra.get(k), rb.get(k)
        lines.append(f"{k:<22}{str(va)[:38]:<40}{str(vb)[:38]:<40}" + ("" if va == vb else "  <- differs"))
    fa, fb = _flat(ka, a), _flat(kb, b)
    lines += ["", f"{'metric':<32}{'A':>10}{'B':>10}{'B - A':>10}"]
    for k in sorted(set(fa) | set(fb), key=lambda s: (s.split(".")[0] != "overall", s)):
        va, vb = fa.get(k), fb.get(k)
        numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (va, vb))
        diff = _number(vb - va, sign=True) if numeric else "-"
        lines.append(f"{k:<32}{_number(va):>10}{_number(vb):>10}{diff:>10}")
    return "\n".join(lines)
