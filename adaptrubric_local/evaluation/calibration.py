"""Calibrating `p_success`: temperature scaling or Platt scaling fitted on labelled verdicts, saved
as a small JSON file, and applied to verdicts as `p_success_calibrated` beside the raw value.

Both maps act on z = logit(p) (p clipped to [eps, 1 - eps]): temperature scaling gives sigmoid(z / T),
Platt scaling sigmoid(a z + b), the parameters minimising the labels' negative log-likelihood by
Newton's method. Both are increasing: rankings, AUROC and best-of-N tie-breaks stay, Brier, ECE and the
size of a soft reward change. On verdicts whose p_success says little about the labels the fit
flattens every probability toward the base rate (T at its bound 1 / A_MIN), a constant reward;
`signal_problems` names that. A calibration file is identified by its SHA-256, which scoring records
as provenance. Knows nothing about models or argument parsing.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..schema import json_problem

METHODS = ("temperature", "platt")
MIN_EXAMPLES = 20  # below this a fit is refused: the parameters would follow the noise
A_MIN = 1e-3  # the fit's bound on the slope: T = 1 / a is at most 1000
MIN_SPREAD = 0.05  # calibrated probabilities with a standard deviation below this are called near-constant
FORMAT = "adaptrubric-calibration/1"


@dataclass
class Calibration:
    """A fitted map p -> sigmoid(a * logit(p) + b); temperature scaling has b = 0 and T = 1 / a."""

    method: str = field(metadata={"help": "temperature or platt"})
    a: float = field(metadata={"help": "slope on logit(p) (1 / temperature)"})
    b: float = field(default=0.0, metadata={"help": "intercept (0 for temperature scaling)"})
    eps: float = field(default=1e-6, metadata={"help": "probabilities are clipped to [eps, 1 - eps] first"})
    field_name: str = field(default="p_success", metadata={"help": "the verdict field it was fitted on"})
    n: int = field(default=0, metadata={"help": "labelled verdicts it was fitted on"})
    positives: int = 0
    fitted_on: dict = field(default_factory=dict)  # data and verdict files, verdict file hash
    before: dict = field(default_factory=dict)  # figures on the fitting data with the raw probability
    after: dict = field(default_factory=dict)  # the same figures with the calibrated probability
    created: str | None = None
    format: str = FORMAT

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if not (isinstance(self.a, (int, float)) and math.isfinite(self.a) and self.a > 0):
            raise ValueError(f"a (1/temperature) must be a positive finite number, got {self.a!r}")
        if not (isinstance(self.b, (int, float)) and math.isfinite(self.b)):
            raise ValueError(f"b must be a finite number, got {self.b!r}")
        if self.method == "temperature" and self.b != 0:
            raise ValueError("temperature scaling has no intercept (b must be 0)")
        if not 0 < self.eps < 0.5:
            raise ValueError(f"eps must be in (0, 0.5), got {self.eps!r}")

    @property
    def temperature(self) -> float:
        """T of sigmoid(logit(p) / T) (for Platt scaling: 1 / slope)."""
        return 1.0 / self.a

    def apply(self, p: float | None) -> float | None:
        """The calibrated probability (None stays None)."""
        return None if p is None else float(_sigmoids(self.a * _logits(np.float64(p), self.eps) + self.b))

    def to_dict(self) -> dict:
        """The JSON content of a calibration file."""
        return asdict(self)

    def save(self, path: str | Path) -> str:
        """Write the file; returns its SHA-256."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return file_sha256(path)


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (read a megabyte at a time: a verdict file may be gigabytes)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def load(path: str | Path) -> tuple[Calibration, dict]:
    """A calibration file and its provenance ({"path", "sha256", "method", "a", "b"}); a file that is
    not one is an error naming the file and the field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"calibration file not found: {path}")
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({json_problem(exc, line=True)})") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ValueError(f"{path}: not a calibration file (field 'format' must be {FORMAT!r}; "
                         "write one with `adaptrubric calibrate`)")
    if unknown := sorted(set(d) - set(Calibration.__dataclass_fields__)):
        raise ValueError(f"{path}: unknown field(s) {', '.join(unknown)}")
    for k in ("method", "a"):
        if k not in d:
            raise ValueError(f"{path}: field {k!r} is missing")
    try:
        cal = Calibration(**d)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    return cal, {"path": str(path), "sha256": file_sha256(path), "method": cal.method, "a": cal.a, "b": cal.b}


# ----------------------------------------------------------------------------- fitting
CHUNK = 1 << 16  # rows a step of the fit works on at once: its temporaries stay small on a million rows


def _sigmoids(t: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(t))
    return np.where(t >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _loss(z: np.ndarray, y: np.ndarray, a: float, b: float) -> float:
    """The log-loss of sigmoid(a z + b): sum of log(1 + e^t) - y t, computed stably."""
    s = 0.0
    for k in range(0, len(z), CHUNK):
        t = a * z[k:k + CHUNK] + b
        s += float((np.log1p(np.exp(-np.abs(t))) + np.maximum(t, 0.0) - y[k:k + CHUNK] * t).sum())
    return s


def _derivatives(z: np.ndarray, y: np.ndarray, a: float, b: float) -> tuple[float, ...]:
    """(d/da, d/db, d2/da2, d2/dadb, d2/db2) of `_loss`."""
    g = np.zeros(5)
    for k in range(0, len(z), CHUNK):
        zc = z[k:k + CHUNK]
        q = _sigmoids(a * zc + b)
        w = q * (1 - q)
        r = q - y[k:k + CHUNK]
        g += ((r * zc).sum(), r.sum(), (w * zc * zc).sum(), (w * zc).sum(), w.sum())
    return tuple(float(x) for x in g)


def _newton(z: np.ndarray, y: np.ndarray, intercept: bool, iters: int = 100) -> tuple[float, float]:
    """(a, b) minimising the log-loss of sigmoid(a z + b), by damped Newton steps; a >= A_MIN."""
    a, b = 1.0, 0.0
    cur = _loss(z, y, a, b)
    for _ in range(iters):
        ga, gb, haa, hab, hbb = _derivatives(z, y, a, b)
        det = haa * hbb - hab * hab if intercept else haa
        if det <= 1e-12:
            break
        da, db = ((hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det) if intercept else (ga / haa, 0.0)
        step = 1.0
        while step > 1e-6:  # halve the step until the loss does not grow
            na, nb = max(a - step * da, A_MIN), b - step * db
            new = _loss(z, y, na, nb)
            if new <= cur + 1e-12:
                break
            step /= 2
        else:
            break
        done = abs(na - a) < 1e-10 and abs(nb - b) < 1e-10
        a, b, cur = na, nb, new
        if done:
            break
    return a, b


def fit(probs: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray, method: str = "temperature",
        eps: float = 1e-6, min_examples: int = MIN_EXAMPLES) -> Calibration:
    """Fit a calibration on probabilities and their 0/1 labels (memory of some bytes a pair); refuses
    fewer than `min_examples` pairs or a single class."""
    p, y = np.asarray(probs, dtype=np.float64), np.asarray(labels)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if len(p) != len(y):
        raise ValueError(f"{len(p)} probabilities but {len(y)} labels")
    outside = ~((p >= 0.0) & (p <= 1.0))
    if outside.any():
        raise ValueError(f"probability {float(p[outside][0])!r} is outside [0, 1]")
    if ((y != 0) & (y != 1)).any():
        raise ValueError(f"label {int(y[(y != 0) & (y != 1)][0])!r} is not 0 or 1")
    n = len(p)
    if n < min_examples:
        raise ValueError(f"{n} labelled verdict(s) with a probability; calibration needs at least "
                         f"{min_examples}, and 50-200 for a stable fit (eval/calibration_data.py)")
    pos = int(y.sum(dtype=np.int64))
    if pos in (0, n):
        raise ValueError("every labelled verdict has the same label; calibration needs successes and failures")
    z = _logits(p, eps)
    a, b = _newton(z, y, intercept=method == "platt")  # b stays 0 without the intercept
    return Calibration(method=method, a=a, b=b, eps=eps, n=n, positives=pos, before=_figures(p, y),
                       after=_figures(_sigmoids(a * z + b), y),
                       created=datetime.datetime.now().isoformat(timespec="seconds"))


def _logits(p: np.ndarray, eps: float) -> np.ndarray:
    c = np.clip(p, eps, 1.0 - eps)
    return np.log(c / (1.0 - c))


def _figures(probs: np.ndarray, labels: np.ndarray) -> dict:
    from .probability import figures

    f = figures(probs, labels)
    return {k: f[k] for k in ("n", "brier", "ece", "auroc")} | {"nll": nll(probs, labels)} | spread(probs)


def spread(probs: Sequence[float] | np.ndarray) -> dict:
    """How much the probabilities vary: {"std" (population), "min", "max"}."""
    p = np.asarray(probs, dtype=np.float64)
    return {"std": float(np.sqrt(((p - p.mean()) ** 2).mean())), "min": float(p.min()), "max": float(p.max())}


def signal_problems(cal: Calibration, min_spread: float = MIN_SPREAD) -> list[str]:
    """What, in the fit, leaves a `p_success` reward without a learning signal: the slope at its bound
    (T = 1 / A_MIN), or calibrated probabilities on the fitting data whose standard deviation is below
    `min_spread`. Empty when neither (a file written before the spread was recorded is judged on the
    bound alone)."""
    out = []
    if cal.a <= A_MIN * (1 + 1e-9):
        out.append(f"the fit reached its bound T = {1 / A_MIN:g} (the largest temperature it may take): the labels "
                   "are about as likely whatever p_success says, so it flattens p_success toward one value")
    std = cal.after.get("std")
    if isinstance(std, (int, float)) and std < min_spread:
        lo, hi = cal.after.get("min"), cal.after.get("max")
        span = f", from {lo:.4f} to {hi:.4f}" if isinstance(lo, float) and isinstance(hi, float) else ""
        raw = cal.before.get("std")
        out.append(f"the calibrated p_success is near-constant on the {cal.n} fitting verdicts: standard "
                   f"deviation {std:.4f}{span} (below {min_spread:g}"
                   + (f"; raw p_success {raw:.4f})" if isinstance(raw, float) else ")"))
    if out:
        auroc = cal.before.get("auroc")
        out.append((f"AUROC {auroc:.2f} on these labels; " if isinstance(auroc, float) else "")
                   + "a `p_success` reward read through this calibration is about the same for every trajectory "
                   "(a constant reward: no learning signal). Check the verifier and the labels (`eval`), or "
                   "reward with the binary score")
    return out


def nll(probs: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray, eps: float = 1e-12) -> float:
    """Mean negative log-likelihood of the labels."""
    p = np.clip(np.asarray(probs, dtype=np.float64), eps, 1 - eps)
    y = np.asarray(labels)
    return float(-np.log(np.where(y == 1, p, 1 - p)).sum() / max(1, len(p)))


def fit_rows(rows: dict[str, np.ndarray], method: str = "temperature", **kw) -> Calibration:
    """`fit` on the labelled rows of a verdict table (verdict_table.py) that carry a p_success (of any
    status)."""
    have = (rows["label"] >= 0) & ~np.isnan(rows["p_success"])
    return fit(rows["p_success"][have], rows["label"][have], method, **kw)


def provenance(prov: dict) -> dict:
    """What a verdict file's config sidecar records about the calibration used: its hash and map
    (`calibration`, compared on resume) and where it was read from (`calibration_path`)."""
    return {"calibration": {k: prov[k] for k in ("sha256", "method", "a", "b")}, "calibration_path": prov["path"]}
