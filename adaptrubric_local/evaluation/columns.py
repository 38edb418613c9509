"""`eval` over a large run in memory that grows with what it must keep: the verdict file and the data
are read line by line into columns (numpy arrays looking into the buffers they were built in: a status
code, score, label, platform code, the two probabilities, costs; 49 bytes a verdict and its 16-byte id
digest, against some kilobytes as Verdict and Trajectory objects), deduplicated only when an id repeats,
the data's labels and platforms put straight beside the verdicts they belong to (a few bytes a verdict,
none a record), and the figures of metrics.py, probability.py and coverage.py are computed over the
columns without copying them. The definitions are those modules' own (same counts, same rates;
AUROC/AUPRC/Brier/ECE equal to within float rounding): a test checks the two paths give the same
metrics on the same files.

Used by `run_eval` (the metrics, beside a review page of a sample of cards) and `calibrate` (the pairs
it fits on), the labels files' labels put on the data's (column_labels.py: memory that grows with the
labels files). Knows nothing about plots, reports or argument parsing.
"""
from __future__ import annotations

from array import array
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..formats.base import OUTSIDE_ROOTS
from ..formats.ids import DIGEST, IdBuilder, digest
from ..formats.stream import stream_trajectories
from ..labels import AppliedLabels
from ..schema import json_lines
from . import column_labels
from . import probability as PR
from .array_figures import figures
from .coverage import SUBSETS, Coverage, first
from .metrics import accounting_text, rates

STATUSES = ("ok", "unparsed", "error", "missing")
OK, UNPARSED, ERROR, MISSING = range(4)


class Columns:
    """One row per verdict: int8 status/score/label (-1: none), platform codes, float probabilities (nan:
    none), costs; `key`: each row's id digest."""

    FIELDS: ClassVar[dict[str, str]] = {  # 49 bytes a row
        "status": "b", "score": "b", "label": "b", "platform": "i", "p": "d", "pcal": "d", "ctok": "d", "ccalls": "d",
        "own": "i", "images": "i", "cap": "b", "ctx": "b"}

    def __init__(self):
        self.cols = {k: array(t) for k, t in self.FIELDS.items()}
        self.ids = IdBuilder()
        self.platforms: dict[str | None, int] = {}
        self.models: set = set()
        self.banks: set = set()
        self.sorted_keys: np.ndarray | None = None  # the verdicts' digests, sorted, each once (read_verdicts)

    def code(self, platform: str | None) -> int:
        return self.platforms.setdefault(platform, len(self.platforms))

    def add(self, d: dict, status: int, label, platform: str | None) -> None:
        """One verdict line `d` (its status code, the label it is evaluated with, its platform)."""
        c = self.cols
        c["status"].append(status)
        c["score"].append(d.get("score") if d.get("score") in (0, 1) else -1)
        c["label"].append(label if label in (0, 1) else -1)
        c["platform"].append(self.code(platform))
        for name, key in (("p", "p_success"), ("pcal", "p_success_calibrated")):
            v = d.get(key)
            c[name].append(float(v) if v is not None else np.nan)
        c["cap"].append(bool(d.get("hit_cap")))
        c["ctx"].append(bool(d.get("hit_context")))
        self.add_more(d)

    def add_more(self, d: dict) -> None:
        """The columns of FIELDS beyond those every Columns has: the costs."""
        c = self.cols
        c["ctok"].append(float(d.get("cost_tokens") or 0))
        c["ccalls"].append(float(d.get("cost_calls") or 0))
        c["own"].append(int(d.get("prompt_tokens") or 0) + int(d.get("completion_tokens") or 0))
        c["images"].append(int(d.get("n_images") or 0))

    def frozen(self) -> dict[str, np.ndarray]:
        """The columns as arrays that look into the buffers (no copy: nothing is added after this)."""
        out = {k: np.frombuffer(v, dtype=v.typecode) if len(v) else np.zeros(0, dtype=v.typecode)
               for k, v in self.cols.items()}
        out["key"] = self.ids.view()
        return out


def read_verdicts(path: Path, cols: Columns | None = None, platform=lambda d: d.get("platform")
                  ) -> tuple[dict[str, np.ndarray], Columns]:
    """The verdict file's last line per id, as columns (in the order ids first appear), into `cols` (a
    new Columns by default) with `platform(line)` in the platform column."""
    cols = cols if cols is not None else Columns()
    with open(path, encoding="utf-8") as fh:
        for n, d in json_lines(fh, path):
            if not isinstance(d, dict) or "id" not in d or "status" not in d:
                raise ValueError(f"{path}: line {n}: not a verdict line (needs 'id' and 'status')")
            cols.ids.add(str(d["id"]))
            cols.add(d, STATUSES.index(d["status"]) if d["status"] in STATUSES else UNPARSED, d.get("label"),
                     platform(d))
            cols.models.add(d.get("model"))
            cols.banks.add(d.get("bank_sha"))
    a = cols.frozen()
    cols.sorted_keys = np.sort(a["key"])
    s = cols.sorted_keys
    if len(s) > 1 and (s[1:] == s[:-1]).any():  # a retried id: its last line, column by column
        cols.sorted_keys = np.unique(s)
        _, last = np.unique(a["key"][::-1], return_index=True)
        rows = np.sort(len(a["key"]) - 1 - last)
        for k in list(a):
            a[k] = a[k][rows]
    return a, cols


def _names(path: Path, keys: np.ndarray) -> list[str]:
    """The ids (in file order) of the verdict lines whose digests are in `keys`."""
    wanted = set(keys.tolist())
    out: dict[str, None] = {}
    if wanted:
        with open(path, encoding="utf-8") as fh:
            for _, d in json_lines(fh, path):
                if digest(str(d["id"])).rstrip(b"\0") in wanted:
                    out[str(d["id"])] = None
    return list(out)


def _sorted_has(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    if not len(sorted_keys):
        return np.zeros(len(keys), dtype=bool)
    k = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[k] == keys


def read_data(data, v: dict, cols: Columns, fmt: str = "auto", image_roots=()) -> dict:
    """What the data set says of the verdicts' ids (`have`: their sorted digests; `in`, `label`,
    `platform`: one entry each, in that order), the ids, labels and platforms of its trajectories without
    a verdict, its unreadable records' ids (`errors` of them, the first one's message) and how many
    records it holds: a few bytes per verdict, none per record."""
    have = cols.sorted_keys if cols.sorted_keys is not None else np.unique(v["key"])
    stream = stream_trajectories(data, fmt=fmt, check_images=False, image_roots=image_roots)
    return read_stream(stream, have, lambda x: cols.code(x.platform))


def read_stream(stream, have: np.ndarray, code) -> dict:
    """`read_data`'s dict from a stream of trajectories (`items()`, `repeated(id)`, `records`: a
    formats/stream.py stream, or a labelled one), `code(trajectory)` in the platform column."""
    n = len(have)
    found, labels, plats = np.zeros(n, bool), np.full(n, -1, "int8"), np.zeros(n, "int32")
    missing, missing_labels, missing_plats, bad, outside, good_repeated = [], [], [], [], [], set()
    from ..scoring import error_id

    good, errors, first_error = 0, 0, None
    for _, x in stream.items():
        if isinstance(x, Exception):
            bad.append(error_id(x))
            errors += 1
            first_error = first_error or str(x)
            if OUTSIDE_ROOTS in str(x):
                outside.append(x)
            continue
        good += 1
        if stream.repeated(x.id):  # a later record with this id is an error: not an unread trajectory
            good_repeated.add(x.id)
        label = x.label if x.label in (0, 1) else -1
        key = digest(x.id).rstrip(b"\0")
        j = int(np.searchsorted(have, key)) if n else 0
        if j < n and have[j] == key:
            found[j], labels[j], plats[j] = True, label, code(x)
        else:
            missing.append(x.id)
            missing_labels.append(label)
            missing_plats.append(code(x))
    return {"have": have, "in": found, "label": labels, "platform": plats, "good": good,
            "missing": missing, "missing_labels": missing_labels, "missing_platforms": missing_plats,
            "bad": [i for i in dict.fromkeys(map(str, bad)) if i not in good_repeated], "outside": outside,
            "records": stream.records, "errors": errors, "first_error": first_error}


def align(path: Path, v: dict, d: dict | None, subset: str, allow_extra: bool, data_name: str | None):
    """coverage.align over columns: (the rows to evaluate, Coverage)."""
    if subset not in SUBSETS:
        raise ValueError(f"subset must be one of {', '.join(SUBSETS)}, got {subset!r}")
    n = len(v["key"])
    if d is None:
        return v, Coverage(labels="verdicts", subset=subset, verdicts=n, covered=n, evaluated=n)
    at = np.searchsorted(d["have"], v["key"]) if n else np.zeros(0, np.int64)
    in_data = d["in"][at]
    bad = d["bad"]
    bad_keys = np.sort(np.array([digest(i).rstrip(b"\0") for i in bad], dtype=f"S{DIGEST}"))
    in_bad = _sorted_has(bad_keys, v["key"]) & ~in_data
    known = in_data | in_bad
    stale = ~known & (v["status"] == ERROR)
    stale_names = _names(path, v["key"][stale])
    if stale.any():
        keep = ~stale
        v, in_data, in_bad, known, at = (_rows(v, keep), in_data[keep], in_bad[keep], known[keep], at[keep])
    extra = _names(path, v["key"][~known])
    if extra and not allow_extra:
        raise ValueError(f"{path} holds verdicts for {len(extra)} id(s) that are not in {data_name or 'the data set'} "
                         f"(first: {first(extra)}): wrong DATA or --verdicts? Pass --allow-extra to leave them out and "
                         "evaluate the data set's trajectories")
    have_n = len(v["key"])
    rows = v if known.all() else _rows(v, known)
    from_data, at = in_data[known], at[known]
    rows["label"] = np.where(from_data, d["label"][at], -1).astype("int8")
    rows["platform"] = np.where(from_data, d["platform"][at], rows["platform"]).astype("int32")
    del at
    m = len(d["missing"])
    if subset == "data" and m:
        add = {k: np.zeros(m, dtype=a.dtype) for k, a in rows.items() if k != "key"}
        add.update(status=np.full(m, MISSING, "int8"), score=np.full(m, -1, "int8"),
                   label=np.array(d["missing_labels"], dtype="int8"), p=np.full(m, np.nan), pcal=np.full(m, np.nan),
                   platform=np.array(d["missing_platforms"], dtype="int32"))
        add["key"] = np.array([digest(i).rstrip(b"\0") for i in d["missing"]], dtype=f"S{DIGEST}")
        rows = {k: np.concatenate([rows[k], add[k]]) for k in rows}
    cov = Coverage(labels="data", subset=subset, trajectories=d["good"] + len(bad), verdicts=have_n,
                   covered=int(known.sum()), missing=list(d["missing"]),
                   missing_labelled=sum(y in (0, 1) for y in d["missing_labels"]), extra=extra,
                   stale_errors=stale_names, not_loaded=bad, not_loaded_verdicts=int(in_bad.sum()),
                   evaluated=len(rows["key"]))
    return rows, cov


def _rows(cols: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    """The rows of `mask`, as new columns (the caller drops the old ones)."""
    return {k: a[mask] for k, a in cols.items()}


def _confusion(label: np.ndarray, pred: np.ndarray) -> dict[str, int]:
    right = label == pred
    pos = pred == 1
    return {"tp": int((right & pos).sum()), "fp": int((~right & pos).sum()), "tn": int((right & ~pos).sum()),
            "fn": int((~right & ~pos).sum())}


def classification(r: dict) -> dict:
    """metrics.classification over rows (all labelled)."""
    status, label, score = r["status"], r["label"], r["score"]
    ok = status == OK
    pred = np.where(ok & (score >= 0), score, 0)
    c_all = _confusion(label, pred)
    c_ok = _confusion(label[ok], np.where(score[ok] >= 0, score[ok], -1))
    n = len(status)
    un = ~ok
    return {"n": n, "scored": int(ok.sum()), "unparsed": int((status == UNPARSED).sum()),
            "errors": int((status == ERROR).sum()), "missing": int((status == MISSING).sum()),
            "positives": int((label == 1).sum()), "hit_cap": int(r["cap"].sum()), "hit_context": int(r["ctx"].sum()),
            **rates(c_all), "confusion": c_all,
            "unanswered_as_fail": {"fn": int((label[un] == 1).sum()), "tn": int((label[un] == 0).sum())},
            "acc_strict": 100.0 * (c_ok["tp"] + c_ok["tn"]) / n if n else None,
            "scored_only": {"n": int(ok.sum()), **rates(c_ok), "confusion": c_ok}}


def evaluate(r: dict, platforms: dict) -> dict:
    """metrics.evaluate over rows."""
    names: dict[str, list[int]] = {}
    for p, c in platforms.items():
        names.setdefault(p or "unknown", []).append(c)
    lab = r["label"] >= 0
    sub = r if lab.all() else {k: a[lab] for k, a in r.items()}
    per = {}
    for name in sorted(names):
        mask = np.isin(sub["platform"], names[name])
        if mask.all():
            per[name] = classification(sub)
        elif mask.any():
            per[name] = classification({k: a[mask] for k, a in sub.items()})
    return {"overall": classification(sub), "per_platform": per, "unlabelled": int((~lab).sum())}


def probability(r: dict) -> dict:
    """probability.summaries over the rows the file holds (missing stand-ins left out)."""
    cov = r["status"] != MISSING
    lab = cov & (r["label"] >= 0)
    out = {}
    for field, col in zip(PR.PROB_FIELDS, ("p", "pcal")):
        have = lab & ~np.isnan(r[col])
        if not have.any():
            continue
        s = figures(r[col][have], r["label"][have])
        st = r["status"][have]
        s.update(field=field, without_probability=int(lab.sum() - have.sum()),
                 statuses={STATUSES[k]: int((st == k).sum()) for k in sorted(set(st.tolist()), key=STATUSES.__getitem__)})
        s["statuses"] = dict(sorted(s["statuses"].items()))
        out[field] = s
    return out


def efficiency(r: dict, run_summary: dict | None = None) -> dict:
    """metrics.efficiency over the rows the file holds."""
    st, ctok, ccalls, own = r["status"], r["ctok"], r["ccalls"], r["own"]
    cov = st != MISSING
    full = (ctok != 0) | (ccalls != 0)  # the verdict's own cost fields, else its call's tokens and one call
    own_call = (own > 0) | (st != ERROR)
    ans, err = cov & (st != ERROR), cov & (st == ERROR)
    n = int(ans.sum())

    def spent(rows):
        tokens = float(ctok.sum(where=rows & full)) + float(own.sum(where=rows & ~full, dtype=np.float64))
        return tokens, float(ccalls.sum(where=rows & full)) + float((rows & ~full & own_call).sum())

    (t, c), (_, err_calls) = spent(ans), spent(err)
    out = {"trajectories": n, "tokens": t, "calls": c, "tokens_per_traj": t / max(1, n),
           "calls_per_traj": c / max(1, n),
           "images_per_traj": float(r["images"].sum(where=ans, dtype=np.float64)) / max(1, n),
           "accounting": accounting_text(int((full & ans).sum()), n), "errors": int(err.sum()),
           "error_calls": err_calls}
    if run_summary and run_summary.get("s_per_traj") is not None:
        out["s_per_traj"] = run_summary["s_per_traj"]
        out["minutes"] = out["s_per_traj"] * n / 60
    return out


def read(verdicts_path: str | Path, data=None, fmt: str = "auto", image_roots=(), labels=(),
         data_name: str | None = None) -> tuple[dict, Columns, dict | None, AppliedLabels | None]:
    """(the verdict file's columns, their reader, what the data says of them or None without data, what the
    labels files did or None without any): the labels files are read first (a bad line stops before the
    data is read), then put on the data's labels (column_labels.py)."""
    if labels and data is None:
        raise ValueError("--labels needs DATA: a labels file labels the trajectories of a data set")
    files = column_labels.read(labels)
    path = Path(verdicts_path)
    v, cols = read_verdicts(path)
    d = read_data(data, v, cols, fmt, image_roots) if data is not None else None
    applied = column_labels.apply(files, d, data_name or str(data)) if files else None
    return v, cols, d, applied


def covered(verdicts_path, data, subset: str = "data", allow_extra: bool = False, fmt: str = "auto",
            image_roots=(), labels=(), log=None) -> tuple[dict, Columns, Coverage, AppliedLabels | None]:
    """harness.covered_verdicts over columns, the `labels` files put on the data's labels: (the rows, the
    columns reader, the Coverage, what the labels did or None). `log`: where the records that did not load
    and the labels' summary are said (as cli/common.py's `load_labelled` says them)."""
    from ..labels import not_loaded_warning
    from .image_roots import outside_image_roots

    v, cols, d, applied = read(verdicts_path, data, fmt, image_roots, labels)
    if d is not None:
        if d["errors"] and log:
            log(not_loaded_warning(d["errors"], d["records"], d["first_error"], data))
        if applied and log:
            log(applied.summary())
        if d["outside"]:
            from types import SimpleNamespace

            n = d["records"] - len(d["outside"])
            outside_image_roots(SimpleNamespace(errors=d["outside"], trajectories=range(n)), data)
    rows, cov = align(Path(verdicts_path), v, d, subset, allow_extra, str(data) if data else None)
    return rows, cols, cov, applied


def summary(rows: dict, cols: Columns, cov: Coverage, run_summary: dict | None = None) -> dict:
    """The metrics dict `run_eval` writes, less its run record, over the aligned rows (their ids' buffers
    are let go first)."""
    rows.pop("key", None)
    cols.sorted_keys, cols.ids = None, IdBuilder()
    m = evaluate(rows, cols.platforms)
    m["probability"] = probability(rows)
    m["coverage"] = cov.to_dict()
    m["efficiency"] = efficiency(rows, run_summary)
    return m


def metrics(verdicts_path: str | Path, data=None, subset: str = "data", allow_extra: bool = False,
            run_summary: dict | None = None, fmt: str = "auto", image_roots=(), labels=()) -> tuple[dict, Columns, list]:
    """(the metrics dict `run_eval` writes, less its run record; the columns reader (models, banks); the
    data's records that name screenshots outside its folder, with their total, for `outside_image_roots`)."""
    v, cols, d, _ = read(verdicts_path, data, fmt, image_roots, labels)
    rows, cov = align(Path(verdicts_path), v, d, subset, allow_extra, str(data) if data else None)
    outside = [] if d is None else [d["outside"], d["records"]]
    del v, d
    return summary(rows, cols, cov, run_summary), cols, outside
