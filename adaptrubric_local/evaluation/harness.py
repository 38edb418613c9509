"""The evaluation harness: the paper's protocols on any labelled data set, written as files a person
reads (metrics.json / tts.json / ablation.json, report.md, PNG plots) plus `run.json` recording what
produced them. Every figure comes from one verdict table (verdict_table.py); the review page's cards
are Verdict objects of a sample of it (review_sample.py). Knows nothing about argument parsing.
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path

from .._version import __version__
from ..formats import load_trajectories
from ..labels import reviewed
from ..run_settings import sidecar
from ..stages.fusion import ABLATIONS
from ..types import Verdict
from . import benchmark_figures, report, verdict_table, vote_rules
from . import review_sample as sample
from . import tts as test_time_scaling
from .benchmark_figures import BOOTSTRAP, SEED
from .coverage import Coverage
from .metrics import by_platform, costs, probabilities


# ----------------------------------------------------------------------------- inputs
def load_verdicts(path: str | Path) -> list[Verdict]:
    """A verdict JSONL file as Verdict objects, one per id (the last line written for it: a resumed run
    that retried an error appends the new verdict); a malformed line is an error naming the file and
    line."""
    return sample.last_verdicts(Path(path))


def run_meta(verdicts_path: Path | None, models: set, banks: set, **extra) -> dict:
    """What produced a result: the scoring run's config sidecar, the verdicts' model/bank, and more."""
    meta: dict = _sidecar(verdicts_path, "config") or {}
    if verdicts_path is not None:
        meta["verdicts"] = str(verdicts_path)
    models, banks = sorted(m for m in models if m), sorted(b for b in banks if b)
    meta.setdefault("model", models[0] if len(models) == 1 else models or None)
    meta.setdefault("bank_sha", banks[0] if len(banks) == 1 else banks or None)
    meta.setdefault("package_version", __version__)
    meta.update({k: v for k, v in extra.items() if v is not None})
    meta["created"] = datetime.datetime.now().isoformat(timespec="seconds")
    return meta


def _sidecar(verdicts_path: Path | None, kind: str) -> dict | None:
    p = None if verdicts_path is None else sidecar(Path(verdicts_path), kind)
    return json.loads(p.read_text()) if p is not None and p.is_file() else None


def _write(out: Path, name: str, result: dict, markdown: str) -> None:
    """The result as `name`, its run record as run.json, and report.md."""
    for path, obj in ((out / name, result), (out / "run.json", result["run"])):
        path.write_text(json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")
    (out / "report.md").write_text(markdown)


def _metrics(t: verdict_table.Table, verdicts_path: Path, data, labels: dict | None, bootstrap: int = BOOTSTRAP,
             seed: int = SEED) -> tuple[dict, str]:
    """(metrics.json's content, a title) from a verdict table. `labels`: the record of the labels files
    the caller applied to the data it loaded (else the table's own); `bootstrap` resamples (0: none)
    drawn from `seed` give the `benchmark` section's intervals."""
    t.table.release()
    m = by_platform(t.rows, t.table.platforms)
    m["benchmark"] = benchmark_figures.of_rows(t.rows, t.table.platforms, n_boot=bootstrap, seed=seed)
    if (rules := vote_rules.of_rows(t.rows)) is not None:
        m["vote_rules"] = rules
    m["probability"] = probabilities(t.rows)
    m["coverage"] = t.coverage.to_dict()
    m["run"] = run_meta(verdicts_path, t.table.models, t.table.banks, data=str(data) if data else None,
                        labels=t.labels.record() if t.labels else labels)
    m["efficiency"] = costs(t.rows, _sidecar(verdicts_path, "summary"))
    from ..cascade.report import side_by_side

    if both := side_by_side(verdict_table.last_lines(verdicts_path)):  # a cascade's file: its two models
        m["cascade"] = both
    # the page's title: the model that decided (a cascade's: cascade/report.py's `decided`) on the data
    who = (m.get("cascade") or {}).get("decided") or m["run"].get("model") or "verdicts"
    return m, f"{who} on {Path(str(data or verdicts_path)).name}"


def coverage_notes(m: dict) -> list[str]:
    """The coverage sentences of a result (metrics.json or tts.json content)."""
    cov, run = m.get("coverage"), m.get("run", {})
    return [text for _, text in Coverage(**cov).messages(run.get("data"), run.get("verdicts"))] if cov else []


# ----------------------------------------------------------------------------- eval
def run_eval(verdicts_path: str | Path, out: str | Path, data: str | Path | None = None, loaded=None,
             review: bool = True, progress: bool = False, labels: dict | None = None, subset: str = "data",
             allow_extra: bool = False, fmt: str = "auto", image_roots=(), review_cards: int = sample.REVIEW_CARDS,
             labels_files=(), log=None, bootstrap: int = BOOTSTRAP, seed: int = SEED) -> dict:
    """Metrics, report, plots and (with `review`) the review page for one verdict file over the data
    set (`coverage.py`: `subset`, `allow_extra`); returns metrics.json's content. The data is streamed,
    `labels_files` put on its labels (`log`: verdict_table.read), unless `loaded` is given: the data set
    already loaded, with `labels` the record of the labels files applied to it. A run of more than
    `review_cards` verdicts (0: no limit) gets a page of a sample of them (review_sample.py). `bootstrap`
    and `seed`: the benchmark section's intervals (benchmark_figures.py; 0 resamples: none)."""
    if labels_files and loaded is not None:
        raise ValueError("give labels_files (put on the data as it is read) or loaded with them applied, not both")
    verdicts_path = Path(verdicts_path)
    t = verdict_table.read(verdicts_path, data, subset, allow_extra, fmt, image_roots, labels_files, loaded=loaded,
                           log=log)
    m, title = _metrics(t, verdicts_path, data, labels, bootstrap, seed)
    coverage = t.coverage
    del t  # the columns are let go before the page and the plots are made
    (out := Path(out)).mkdir(parents=True, exist_ok=True)
    if review:
        said = reviewed(m["run"].get("labels"))
        shown, traj = sample.sampled(verdicts_path, data, review_cards, coverage, sample.SEED, fmt, image_roots,
                                     {i: r.label for i, r in said.items()}, loaded)
        of = m["coverage"]["evaluated"]
        notes = [sample.note(len(shown), of, review_cards)] if len(shown) < of else []
        write_review_page(out, shown, traj, m, title, progress, reviewed=said, notes=notes)
        m["review"] = "review.html"
        if notes:
            m["review_cards"] = {"shown": len(shown), "of": of, "sample_seed": sample.SEED}
    from ..cascade.report import markdown as cascade_markdown

    _write(out, "metrics.json", m, report.metrics_markdown(m, m["run"], coverage_notes(m))
           + (cascade_markdown(m["cascade"]) if m.get("cascade") else ""))
    report.plot_confusion(m["overall"]["confusion"], out / "confusion.png", f"Confusion matrix: {title}")
    report.plot_per_platform(m["per_platform"], out / "per_platform.png",
                             f"Per-platform metrics (unparsed/errors/missing as predicted failures): {title}")
    report.plot_reliability(list(m["probability"].items()), out / "calibration.png",
                            f"Reliability of p_success: {title}")
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
    figures = ("n", "auroc", "auprc", "brier", "ece")
    meta = {**{k: run.get(k) for k in ("model", "adapter", "data", "verdicts", "created") if run.get(k)},
            "title": f"Verifier review: {title}",
            "probability": {f: {k: s[k] for k in figures} for f, s in (m.get("probability") or {}).items()},
            "confusion": m.get("overall", {}).get("confusion")}
    files = (run.get("labels") or {}).get("files") or []
    shown = page_labels(reviewed or {}, [c["id"] for c in cards], files, run.get("created"))
    meta.update({k: v for k, v in (("order", order), ("labels", shown)) if v})
    return write_review(out, cards, meta, notes, progress)


def ordered(verdicts: list[Verdict], cfg, reviewed: dict | None = None) -> tuple[list[Verdict], dict, dict]:
    """The cards' verdicts in the labelling order of `cfg` (a ReviewOrderConfig), the fields each card
    gets (rank, why, the compared verdict) and what the page says about the order. `reviewed`: the
    labels files' lines (`labels.reviewed`), whose ids go after the others."""
    from .review_order import arrange

    compare = {str(v.id): v for v in load_verdicts(cfg.compare)} if cfg.compare else None
    rows = arrange(verdicts, cfg.order, compare, cfg.seed, cfg.budget,
                   reviewed={i: r.label for i, r in (reviewed or {}).items()})
    extra = {str(v.id): {"rank": k, "rank_reason": why} for k, (v, why) in enumerate(rows, start=1)}
    for i, card in extra.items() if compare is not None else ():
        b = compare.get(i)
        p = b.p_success if b is not None and isinstance(b.p_success, (int, float)) else None
        card["compare"] = None if b is None else {"score": b.score, "status": b.status, "model": b.model, "p_success": p}
    info = {"order": cfg.order, "budget": cfg.budget, "of": len(verdicts), "shown": len(rows),
            "compare": str(cfg.compare) if cfg.compare else None, "seed": cfg.seed if cfg.order == "random" else None}
    return [v for v, _ in rows], extra, info


def run_review(verdicts_path: str | Path, out: str | Path, data: str | Path | None = None, loaded=None,
               progress: bool = False, order=None, labels: dict | None = None, subset: str = "data",
               allow_extra: bool = False) -> dict:
    """The review page alone (`adaptrubric review`), a card for every verdict evaluated; returns the counts
    it shows (`counts`: its cards per outcome, the page's own chips; `n` cards of the `of` verdicts
    evaluated, fewer with a budget) beside the headline's confusion (over all `of`) and the coverage.
    `order`: a ReviewOrderConfig whose order (and budget) the cards follow, after what the labels files of
    `labels` (applied to `loaded`) have decided; those files' labels and notes are on the page's cards."""
    from .review import outcome, outcome_counts

    verdicts_path = Path(verdicts_path)
    if loaded is None and data is not None:
        loaded = load_trajectories(data, check_images=False)
    t = verdict_table.read(verdicts_path, data, subset, allow_extra, loaded=loaded)
    m, title = _metrics(t, verdicts_path, data, labels)
    (out := Path(out)).mkdir(parents=True, exist_ok=True)
    said = reviewed(labels)
    verdicts, _ = sample.sampled(verdicts_path, data, 0, t.coverage, loaded=loaded)
    shown, extra, info = (ordered(verdicts, order, said) if order is not None and order.order
                          else (verdicts, None, None))
    page = write_review_page(out, shown, loaded, m, title, progress, extra, info, reviewed=said)
    return {"page": str(page), "n": len(shown), "of": len(verdicts), "order": info,
            "counts": outcome_counts(map(outcome, shown)), "confusion": m["overall"]["confusion"],
            **{k: m["overall"][k] for k in ("unparsed", "errors", "missing")}, "coverage": m["coverage"]}


# ----------------------------------------------------------------------------- tts
def run_tts(verdicts_path: str | Path, out: str | Path, data: str | Path | None = None,
            max_n: int | None = None, seed: int = test_time_scaling.SEED, subset: str = "data",
            allow_extra: bool = False, fmt: str = "auto", image_roots=(), labels_files=(), log=None) -> dict:
    """Test-time-scaling curves, pool composition, report and figure over the data set's candidates (one without
    a verdict is `missing`), `labels_files` put on its labels; returns tts.json."""
    verdicts_path = Path(verdicts_path)
    t = verdict_table.read(verdicts_path, data, subset, allow_extra, fmt, image_roots, labels_files, candidates=True,
                           log=log)
    res = test_time_scaling.table_curves(t, max_n, seed)
    res["run"] = run_meta(verdicts_path, t.table.models, t.table.banks, data=str(data) if data else None, seed=seed,
                          labels=t.labels.record() if t.labels else None)
    (out := Path(out)).mkdir(parents=True, exist_ok=True)
    _write(out, "tts.json", res, report.tts_markdown(res, res["run"], coverage_notes(res)))
    report.plot_tts(res, out / "tts.png", f"Reward-guided selection: {res['run'].get('model') or verdicts_path.name} "
                                          f"({res['pool']['tasks']} tasks, seed {seed})")
    return res


# ----------------------------------------------------------------------------- ablate
def run_ablation(pipe, data: str | Path, out: str | Path, progress: bool = True, loaded=None) -> dict:
    """The four settings of Table 4 with one pipeline, so routes and cues are computed once and
    shared; writes each setting's verdicts and metrics and the deltas against the full model."""
    from dataclasses import replace

    from ..run_settings import vars_of
    from ..scoring import score_file

    (out := Path(out)).mkdir(parents=True, exist_ok=True)
    loaded = loaded or load_trajectories(data)
    base = pipe.config
    rows = {}
    for name, (coarse, fine) in ABLATIONS.items():
        pipe.config = replace(base, coarse=coarse, fine=fine)
        (vpath := out / name / "verdicts.jsonl").unlink(missing_ok=True)
        score_file(pipe, data, vpath, loaded=loaded, progress=progress)
        rows[name] = run_eval(vpath, out / name, data, loaded)
    pipe.config = base
    full = rows["full"]["overall"]

    def delta(name: str, o: dict) -> dict:
        return {k: (o[k] - full[k]) if name != "full" and o[k] is not None and full[k] is not None else None
                for k in ("acc", "prec", "rec", "f1", "fpr")}

    table = {name: {"overall": m["overall"], "delta": delta(name, m["overall"])} for name, m in rows.items()}
    settings = {k: v for k, v in vars_of(pipe).items() if k not in ("coarse", "fine", "ablation")}
    run = run_meta(None, set(), set(), **settings, data=str(data),
                   shared_calls={"route": pipe.stats.get("calls_route", 0), "cue": pipe.stats.get("calls_cue", 0)})
    result = {"settings": table, "run": run}
    _write(out, "ablation.json", result, report.ablation_markdown(table, run))
    return result
