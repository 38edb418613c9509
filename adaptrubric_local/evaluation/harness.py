"""The evaluation harness: the paper's protocols on any labelled data set, written as files a person
reads (metrics.json / tts.json / ablation.json, report.md, PNG plots) plus `run.json` recording what
produced them, so two result folders can be compared.

Reads verdict files and data sets, calls `metrics`, `tts` and `report`; scoring (for `--model`)
goes through `scoring.score_file`. Knows nothing about argument parsing.
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path

from .._version import __version__
from ..cascade.scorer import CascadeVerdict
from ..formats import load_trajectories
from ..fusion import ABLATIONS
from ..labels import reviewed
from ..run_settings import sidecar
from ..schema import json_lines
from ..scoring import error_id, last_per_id
from ..types import Verdict
from . import coverage as C
from . import metrics as M
from . import probability as PR
from . import report as R
from . import review_sample as RS
from . import tts as T
from .image_roots import outside_image_roots


# ----------------------------------------------------------------------------- inputs
def load_verdicts(path: str | Path) -> list[Verdict]:
    """Read a verdict JSONL file, one verdict per id (the last line written for it: a resumed run
    that retried an error appends the new verdict); a malformed line is an error naming the file
    and line."""
    path = Path(path)
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, d in json_lines(fh, path):
            if not isinstance(d, dict) or "id" not in d or "status" not in d:
                raise ValueError(f"{path}: line {n}: not a verdict line (needs 'id' and 'status')")
            out.append((CascadeVerdict if "decided_by" in d else Verdict).from_dict(d))  # a cascade's keeps both
    return last_per_id(out)


def covered_verdicts(verdicts_path: str | Path, data: str | Path | None, loaded, subset: str = "data",
                     allow_extra: bool = False) -> tuple[list[Verdict], C.Coverage]:
    """The verdicts `eval`, `tts` and `review` work over (`columns.covered` is the same over columns, for
    `eval` and `calibrate`), and how they cover the data set: every trajectory of `loaded` (the data set,
    its labels as they are now), those without a verdict as `missing`, those whose records did not load
    unlabelled (`coverage.py`); without a data set, the verdict file's own lines and labels. Stops when
    most records did not load for want of an --image-root (`outside_image_roots`)."""
    verdicts = load_verdicts(verdicts_path)
    if loaded is None:
        return C.align(verdicts, None, subset)
    outside_image_roots(loaded, data)
    return C.align(verdicts, loaded.trajectories, subset, allow_extra, unreadable=[error_id(e) for e in loaded.errors],
                   data=str(data) if data else None, verdicts_name=str(verdicts_path))


def run_meta(verdicts_path: Path | None, verdicts: list[Verdict], **extra) -> dict:
    """What produced a result: the scoring run's config sidecar, the verdicts' model/bank, and more."""
    meta: dict = {}
    if verdicts_path is not None:
        cfg = sidecar(Path(verdicts_path), "config")
        if cfg.is_file():
            meta.update(json.loads(cfg.read_text()))
        meta["verdicts"] = str(verdicts_path)
    models = sorted({v.model for v in verdicts if v.model})
    banks = sorted({v.bank_sha for v in verdicts if v.bank_sha})
    meta.setdefault("model", models[0] if len(models) == 1 else models or None)
    meta.setdefault("bank_sha", banks[0] if len(banks) == 1 else banks or None)
    meta.setdefault("package_version", __version__)
    meta.update({k: v for k, v in extra.items() if v is not None})
    meta["created"] = datetime.datetime.now().isoformat(timespec="seconds")
    return meta


def _summary(verdicts_path: Path | None) -> dict | None:
    if verdicts_path is None:
        return None
    p = sidecar(Path(verdicts_path), "summary")
    return json.loads(p.read_text()) if p.is_file() else None


def _dump(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def _inputs(verdicts_path, out, data, loaded, subset: str, allow_extra: bool):
    """(out folder, created; the data set, loaded unless given; the verdicts over it with missing ones;
    their coverage): the first step of `eval`, `review` and `tts`. Labels files are applied to `loaded`
    before this (labels.apply_labels), so coverage counts the labels as they are now."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if loaded is None and data is not None:
        loaded = load_trajectories(data, check_images=False)
    verdicts, cov = covered_verdicts(verdicts_path, data, loaded, subset, allow_extra)
    return out, loaded, verdicts, cov


# ----------------------------------------------------------------------------- eval
def _evaluated(verdicts_path, out, data, loaded, labels=None, subset="data", allow_extra=False):
    """(out folder, the data set, the verdicts with missing ones, their metrics with probability
    figures, coverage and run record, a title): what `eval` and `review` both start from. `labels`: the
    record of the labels files already applied to `loaded` (labels.apply_labels), kept in the run record;
    `subset`, `allow_extra`: coverage.py."""
    out, loaded, verdicts, cov = _inputs(verdicts_path, out, data, loaded, subset, allow_extra)
    m = M.evaluate(verdicts)
    m["probability"] = PR.summaries(C.covered(verdicts))
    m["coverage"] = cov.to_dict()
    m["run"] = run_meta(Path(verdicts_path), verdicts, data=str(data) if data else None, labels=labels)
    title = f"{m['run'].get('model') or 'verdicts'} on {Path(str(data or verdicts_path)).name}"
    return out, loaded, verdicts, m, title


def coverage_notes(m: dict) -> list[str]:
    """The coverage sentences of a result (metrics.json or tts.json content)."""
    cov, run = m.get("coverage"), m.get("run", {})
    return C.Coverage(**cov).lines(run.get("data"), run.get("verdicts")) if cov else []


def run_eval(verdicts_path: str | Path, out: str | Path, data: str | Path | None = None, loaded=None,
             review: bool = True, progress: bool = False, labels: dict | None = None, subset: str = "data",
             allow_extra: bool = False, fmt: str = "auto", image_roots=(), review_cards: int = RS.REVIEW_CARDS,
             labels_files=(), log=None) -> dict:
    """Metrics, report, plots and (with `review`) the review page for one verdict file over the data
    set (`coverage.py`: `subset`, `allow_extra`); returns metrics.json's content. `loaded`: the data set
    already loaded, to avoid reading it again. Without `loaded` and `labels`, the files are read into
    columns (evaluation/columns.py: memory that does not grow with the run's size), `labels_files` put on
    the data's labels (`log`: columns.covered), and a run of more than `review_cards` verdicts (0: no
    limit) gets a page of a sample of them (review_sample.py)."""
    if loaded is None and labels is None and (not review or RS.more_lines(verdicts_path, review_cards)):
        m, title = _columnar(verdicts_path, data, subset, allow_extra, fmt, image_roots, labels_files, log)
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        if review:
            of, said = m["coverage"]["verdicts"], reviewed(m["run"].get("labels"))
            shown, traj = RS.sampled(Path(verdicts_path), data, review_cards, RS.SEED, fmt, image_roots,
                                     {i: r.label for i, r in said.items()})
            write_review_page(out, shown, traj, m, title, progress, reviewed=said,
                              notes=[RS.note(len(shown), of, review_cards)])
            m["review"], m["review_cards"] = "review.html", {"shown": len(shown), "of": of, "sample_seed": RS.SEED}
        return _write_eval(out, m, title)
    if labels_files:
        raise ValueError("labels_files are read on the columns path; load the data with them applied instead")
    out, loaded, verdicts, m, title = _evaluated(verdicts_path, out, data, loaded, labels, subset, allow_extra)
    m["efficiency"] = M.efficiency(C.covered(verdicts), _summary(Path(verdicts_path)))
    _add_cascade(m, Path(verdicts_path))
    title = _title(m, data or verdicts_path)
    if review:
        write_review_page(out, verdicts, loaded, m, title, progress, reviewed=reviewed(labels))
        m["review"] = "review.html"
    return _write_eval(out, m, title)


def _columnar(verdicts_path, data, subset: str, allow_extra: bool, fmt: str = "auto", image_roots=(),
              labels=(), log=None) -> tuple[dict, str]:
    """`_evaluated`'s metrics (with efficiency) and title, from columns (evaluation/columns.py)."""
    from . import columns

    rows, cols, cov, applied = columns.covered(verdicts_path, data, subset, allow_extra, fmt, image_roots, labels, log)
    m = columns.summary(rows, cols, cov, _summary(Path(verdicts_path)))
    stand_ins = [Verdict(model=md, bank_sha=b) for md in cols.models for b in cols.banks]
    m["run"] = run_meta(Path(verdicts_path), stand_ins, data=str(data) if data else None,
                        labels=applied.record() if applied else None)
    m["efficiency"] = m.pop("efficiency")  # the key order of the other path's metrics.json
    _add_cascade(m, Path(verdicts_path))
    return m, _title(m, data or verdicts_path)


def _title(m: dict, where) -> str:
    """A page's title: the model that decided (a cascade's: cascade/report.py's `decided`) on the data."""
    who = (m.get("cascade") or {}).get("decided") or m["run"].get("model") or "verdicts"
    return f"{who} on {Path(str(where)).name}"


def _add_cascade(m: dict, verdicts_path: Path) -> None:
    """A cascade's file (its lines say `decided_by`): the student and the judge side by side in `m`."""
    from ..cascade.report import side_by_side
    from ..verdict_file import iter_last_lines

    both = side_by_side(iter_last_lines(verdicts_path))
    if both:
        m["cascade"] = both


def _write_eval(out: Path, m: dict, title: str) -> dict:
    """metrics.json, run.json, the plots and report.md of an evaluation; returns `m`."""
    _dump(out / "metrics.json", m)
    _dump(out / "run.json", m["run"])
    R.plot_confusion(m["overall"]["confusion"], out / "confusion.png", f"Confusion matrix: {title}")
    R.plot_per_platform(m["per_platform"], out / "per_platform.png",
                        f"Per-platform metrics (unparsed/errors/missing as predicted failures): {title}")
    R.plot_reliability(list(m["probability"].items()), out / "calibration.png", f"Reliability of p_success: {title}")
    from ..cascade.report import markdown as cascade_markdown

    (out / "report.md").write_text(R.metrics_markdown(m, m["run"], coverage_notes(m))
                                   + (cascade_markdown(m["cascade"]) if m.get("cascade") else ""))
    return m


# ----------------------------------------------------------------------------- review
def write_review_page(out: Path, verdicts: list[Verdict], loaded, m: dict, title: str, progress: bool = False,
                      extra: dict | None = None, order: dict | None = None,
                      reviewed: dict | None = None, notes: list[str] | None = None) -> Path:
    """review.html for labelled verdicts whose metrics are `m` (cards from `loaded`'s trajectories, in
    the order of `verdicts`; `extra` and `order` from `ordered`; `reviewed`: the labels files' lines,
    `labels.reviewed`, shown on the cards as the reviewer's labels)."""
    from .review import build_cards
    from .review_page import page_labels, write_review

    run = m.get("run", {})
    cards, built = build_cards(verdicts, loaded.trajectories if loaded else [], run, progress, extra)
    notes = [*(notes or []), *built]
    if loaded is None:
        notes.append("no data set given: the cards show the verdicts only")
    meta = {k: run.get(k) for k in ("model", "adapter", "data", "verdicts", "created") if run.get(k)}
    meta["title"] = f"Verifier review: {title}"
    meta["probability"] = {f: {k: s[k] for k in ("n", "auroc", "auprc", "brier", "ece")}
                           for f, s in (m.get("probability") or {}).items()}
    meta["confusion"] = m.get("overall", {}).get("confusion")
    if order:
        meta["order"] = order
    files = (run.get("labels") or {}).get("files") or []
    shown = page_labels(reviewed or {}, [c["id"] for c in cards], files, run.get("created"))
    if shown:
        meta["labels"] = shown
    return write_review(out, cards, meta, notes, progress)


def ordered(verdicts: list[Verdict], cfg, reviewed: dict | None = None) -> tuple[list[Verdict], dict, dict]:
    """The cards' verdicts in the labelling order of `cfg` (a ReviewOrderConfig), the fields each card
    gets (rank, why, the compared verdict) and what the page says about the order. `reviewed`: the
    labels files' lines (`labels.reviewed`), whose ids go after the others."""
    from .review_order import arrange

    compare = {str(v.id): v for v in load_verdicts(cfg.compare)} if cfg.compare else None
    rows = arrange(verdicts, cfg.order, compare, cfg.seed, cfg.budget,
                   reviewed={i: r.label for i, r in (reviewed or {}).items()})
    extra = {}
    for k, (v, why) in enumerate(rows, start=1):
        extra[str(v.id)] = {"rank": k, "rank_reason": why}
        if compare is not None:
            b = compare.get(str(v.id))
            extra[str(v.id)]["compare"] = None if b is None else {
                "score": b.score, "status": b.status, "model": b.model,
                "p_success": b.p_success if isinstance(b.p_success, (int, float)) else None}
    info = {"order": cfg.order, "budget": cfg.budget, "of": len(verdicts), "shown": len(rows),
            "compare": str(cfg.compare) if cfg.compare else None, "seed": cfg.seed if cfg.order == "random" else None}
    return [v for v, _ in rows], extra, info


def run_review(verdicts_path: str | Path, out: str | Path, data: str | Path | None = None, loaded=None,
               progress: bool = False, order=None, labels: dict | None = None, subset: str = "data",
               allow_extra: bool = False) -> dict:
    """The review page alone (`adaptrubric review`); returns the counts it shows (`counts`: its cards per
    outcome, the page's own chips; `n` cards of the `of` verdicts evaluated, fewer with a budget) beside
    the headline's confusion (over all `of`) and the coverage. `order`: a ReviewOrderConfig whose order
    (and budget) the cards follow, after what the labels files of `labels` have decided; those files'
    labels and notes are on the page's cards."""
    from .review import outcome_counts

    out, loaded, verdicts, m, title = _evaluated(verdicts_path, out, data, loaded, labels, subset, allow_extra)
    said = reviewed(labels)
    shown, extra, info = (ordered(verdicts, order, said) if order is not None and order.order
                          else (verdicts, None, None))
    page = write_review_page(out, shown, loaded, m, title, progress, extra, info, reviewed=said)
    return {"page": str(page), "n": len(shown), "of": len(verdicts), "order": info,
            "counts": outcome_counts(shown), "confusion": m["overall"]["confusion"],
            "unparsed": m["overall"]["unparsed"], "errors": m["overall"]["errors"],
            "missing": m["overall"]["missing"], "coverage": m["coverage"]}


# ----------------------------------------------------------------------------- tts
def run_tts(verdicts_path: str | Path, out: str | Path, data: str | Path | None = None,
            max_n: int | None = None, seed: int = T.SEED, loaded=None, labels: dict | None = None,
            subset: str = "data", allow_extra: bool = False, stream=None) -> dict:
    """Test-time-scaling curves, pool composition, report and figure over the data set's candidates (one without
    a verdict is `missing`); returns tts.json. Without `loaded`: columns (tts_columns.py), the data `stream`."""
    if loaded is None:
        from . import tts_columns

        res, verdicts, labels = tts_columns.result(verdicts_path, data, stream, max_n, seed, subset, allow_extra,
                                                   labels)
        (out := Path(out)).mkdir(parents=True, exist_ok=True)
    else:
        out, loaded, verdicts, cov = _inputs(verdicts_path, out, data, loaded, subset, allow_extra)
        res = T.curves(verdicts, max_n=max_n, seed=seed)
        res["classification"] = M.classification([v for v in verdicts if v.label in (0, 1)])
        res["coverage"] = cov.to_dict()
    res["run"] = run_meta(Path(verdicts_path), verdicts, data=str(data) if data else None, seed=seed, labels=labels)
    _dump(out / "tts.json", res)
    _dump(out / "run.json", res["run"])
    R.plot_tts(res, out / "tts.png", f"Reward-guided selection: {res['run'].get('model') or Path(verdicts_path).name} "
                                     f"({res['pool']['tasks']} tasks, seed {seed})")
    (out / "report.md").write_text(R.tts_markdown(res, res["run"], coverage_notes(res)))
    return res


# ----------------------------------------------------------------------------- ablate
def run_ablation(pipe, data: str | Path, out: str | Path, progress: bool = True, loaded=None) -> dict:
    """The four settings of Table 4 with one pipeline, so routes and cues are computed once and
    shared; writes each setting's verdicts and metrics and the deltas against the full model."""
    from dataclasses import replace

    from ..run_settings import vars_of
    from ..scoring import score_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    loaded = loaded or load_trajectories(data)
    base = pipe.config
    rows = {}
    for name, (coarse, fine) in ABLATIONS.items():
        pipe.config = replace(base, coarse=coarse, fine=fine)
        vpath = out / name / "verdicts.jsonl"
        if vpath.exists():
            vpath.unlink()
        score_file(pipe, data, vpath, loaded=loaded, progress=progress)
        rows[name] = run_eval(vpath, out / name, data, loaded)
    pipe.config = base
    full = rows["full"]["overall"]
    table = {}
    for name, m in rows.items():
        o = m["overall"]
        delta = {k: (o[k] - full[k]) if name != "full" and o[k] is not None and full[k] is not None else None
                 for k in ("acc", "prec", "rec", "f1", "fpr")}
        table[name] = {"overall": o, "delta": delta}
    settings = {k: v for k, v in vars_of(pipe).items() if k not in ("coarse", "fine", "ablation")}
    run = run_meta(None, [], **settings, data=str(data),
                   shared_calls={"route": pipe.stats.get("calls_route", 0), "cue": pipe.stats.get("calls_cue", 0)})
    result = {"settings": table, "run": run}
    _dump(out / "ablation.json", result)
    _dump(out / "run.json", run)
    (out / "report.md").write_text(R.ablation_markdown(table, run))
    return result
