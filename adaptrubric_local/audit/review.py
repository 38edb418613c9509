"""The audit's review page: the review page of `adaptrubric review` (evaluation/review_page.py) over the
originals and their counterfactuals, each original followed by its counterfactuals, the originals with
a flip first. A counterfactual's card shows its original's verdict beside its own (the page's
"compared" line), says what the perturbation changed and names the original's card (`#id=ID`);
searching an id shows the original and every counterfactual of it together.

Builds no page machinery of its own and changes nothing on the page; knows nothing about scoring.
"""
from __future__ import annotations

from pathlib import Path

from ..types import Trajectory
from . import perturbations as P


def ordered_ids(audit: dict, originals: list[Trajectory], cfs: dict[str, list[Trajectory]]) -> list[str]:
    """Card order: each original with a flip (0 -> 1 first, then 1 -> 0, then newly unparsed), then the
    others, each followed by its counterfactuals in perturbation order."""
    by_orig: dict[str, list[str]] = {t.id: [] for t in originals}
    for name in audit["perturbations"]:
        for c in cfs.get(name, []):
            by_orig.setdefault(P.split_id(c.id)[0], []).append(c.id)

    def rank(orig: str) -> int:
        rows = audit["perturbations"].values()
        for k, key in enumerate((lambda r: r["flip_ids"]["0->1"], lambda r: r["flip_ids"]["1->0"],
                                 lambda r: r["newly_unparsed"])):
            if any(P.split_id(i)[0] == orig for r in rows for i in key(r)):
                return k
        return 3

    order = sorted(by_orig, key=rank)  # stable: data order within a rank
    return [i for o in order for i in [o, *by_orig[o]]]


def write_pairs_page(out: Path, audit: dict, originals: list[Trajectory], cfs: dict[str, list[Trajectory]],
                     progress: bool = False) -> Path:
    """review.html (+ review_files/) in `out` for the audit's verdict files."""
    import json

    from ..evaluation.harness import load_verdicts
    from ..evaluation.review import build_cards
    from ..evaluation.review_page import write_review
    from ..run_settings import sidecar

    out = Path(out)
    verdicts = {}
    for path in audit["verdict_files"].values():
        verdicts.update({str(v.id): v for v in load_verdicts(path)})
    cfg_path = sidecar(Path(audit["verdict_files"]["verdicts"]), "config")
    run_config = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
    order = [i for i in ordered_ids(audit, originals, cfs) if i in verdicts]
    trajs = originals + [c for v in cfs.values() for c in v]
    extra = {}
    for i in order:
        orig, name = P.split_id(i)
        if name is None or orig not in verdicts:
            continue
        o = verdicts[orig]
        extra[i] = {"compare": {"score": o.score, "status": o.status, "model": f"the original {orig}",
                                "p_success": o.p_success if isinstance(o.p_success, (int, float)) else None}}
    cards, notes = build_cards([verdicts[i] for i in order], trajs, run_config, progress, extra)
    for c in cards:
        orig, name = P.split_id(c["id"])
        row = audit["perturbations"].get(name) if name else None
        if row is not None:
            c["notes"].insert(0, f"counterfactual of {orig} ({name}: {row['change']}; a robust verifier: "
                                 f"{row['robust']}). Its original: review.html#id={orig}; search {orig} to see "
                                 "them together")
    notes.insert(0, "each original is followed by its counterfactuals (ids ID~PERTURBATION), originals with a "
                    "flip first; a counterfactual's 'compared' line is its original's verdict")
    v = audit.get("verdict")
    if v:  # the report's top (report.md): the bottom line, then each perturbation's verdict
        notes[:0] = [f"bottom line: {v['bottom_line']}", "verdicts (rule in report.md): " + ", ".join(
            f"{name} {verdict}" for name, verdict in v["perturbations"].items())]
    meta = {"title": f"Verifier audit: {audit['run'].get('model')}", "model": audit["run"].get("model"),
            "data": audit["run"].get("data"), "created": audit["run"].get("created")}
    return write_review(out, cards, meta, notes, progress)
