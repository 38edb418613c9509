"""The audit's review page: `adaptrubric review`'s page (evaluation/review_page.py) over the originals
and their counterfactuals, each original followed by its counterfactuals, those with a flip first, at
most LIMIT originals. A counterfactual's card shows its original's verdict beside its own and names the
original's card. Builds no page machinery of its own; knows nothing about scoring.
"""
from __future__ import annotations

from pathlib import Path

from ..types import Trajectory, Verdict
from .perturbations import counterfactual_id, split_id

LIMIT = 500  # the originals review.html shows at most (with their counterfactuals)


def ordered_ids(audit: dict, originals: list[str], cfs: dict[str, list[str]]) -> list[str]:
    """Card order over ids: each original with a flip (0 -> 1 first, then 1 -> 0, then newly unparsed),
    then the others, each followed by its counterfactuals in perturbation order."""
    by_orig: dict[str, list[str]] = {i: [] for i in originals}
    for name in audit["perturbations"]:
        for c in cfs.get(name, []):
            by_orig.setdefault(split_id(c)[0], []).append(c)
    ranks: dict[str, int] = {}
    for r in audit["perturbations"].values():
        for k, ids in enumerate((r["flip_ids"]["0->1"], r["flip_ids"]["1->0"], r["newly_unparsed"])):
            for i in ids:
                o = split_id(i)[0]
                ranks[o] = min(k, ranks.get(o, 3))
    order = sorted(by_orig, key=lambda o: ranks.get(o, 3))  # stable: data order within a rank
    return [i for o in order for i in [o, *by_orig[o]]]


def chosen_originals(audit: dict, stream, limit: int) -> tuple[list[str], int]:
    """(the originals the page shows, how many there are): those with a flip or a newly unparsed
    counterfactual first, then the others in data order, `limit` in all; read from the stream's ids."""
    rows = audit["perturbations"].values()
    flipped = [split_id(i)[0] for r in rows for key in ("0->1", "1->0") for i in r["flip_ids"][key]]
    chosen = list(dict.fromkeys(flipped + [split_id(i)[0] for r in rows for i in r["newly_unparsed"]]))[:limit]
    taken, total = set(chosen), [0]

    def note(_position: int, own: str | None) -> bool:  # reads ids only: no record is parsed
        if own is not None:
            total[0] += 1
            if len(chosen) < limit and own not in taken:
                chosen.append(own)
                taken.add(own)
        return False

    for _ in stream.items(note):
        pass
    return chosen, total[0]


def _pick(stream, ids: set) -> list[Trajectory]:
    return [x for _, x in stream.items(lambda _p, own: own is None or own in ids)
            if isinstance(x, Trajectory) and x.id in ids]


def write_pairs_page(out: Path, audit: dict, stream, cf_files: dict[str, Path], roots: list,
                     progress: bool = False, limit: int = LIMIT) -> Path:
    """review.html (+ review_files/) in `out` for the audit's verdict files: at most `limit` originals
    (`chosen_originals`) with their counterfactuals; the page says how many it shows and which."""
    import json

    from ..evaluation.review import build_cards
    from ..evaluation.review_page import write_review
    from ..run_settings import sidecar
    from ..verdict_file import iter_lines
    from .streamed import cf_stream

    out = Path(out)
    chosen, total = chosen_originals(audit, stream, limit)
    keep = set(chosen)
    trajs = _pick(stream, keep)
    cfs: dict[str, list[str]] = {}
    for f in dict.fromkeys(cf_files.values()):
        for c in _pick(cf_stream(f, roots), {counterfactual_id(o, n) for o in keep for n in audit["perturbations"]}):
            cfs.setdefault(split_id(c.id)[1], []).append(c.id)
            trajs.append(c)
    wanted = {t.id for t in trajs}
    verdicts = {i: Verdict.from_dict(d) for path in audit["verdict_files"].values()
                for _, i, d in iter_lines(Path(path)) if i in wanted}
    cfg_path = sidecar(Path(audit["verdict_files"]["verdicts"]), "config")
    run_config = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
    order = [i for i in ordered_ids(audit, chosen, cfs) if i in verdicts]
    extra = {}
    for i in order:
        orig, name = split_id(i)
        if name is None or orig not in verdicts:
            continue
        o = verdicts[orig]
        extra[i] = {"compare": {"score": o.score, "status": o.status, "model": f"the original {orig}",
                                "p_success": o.p_success if isinstance(o.p_success, (int, float)) else None}}
    cards, notes = build_cards([verdicts[i] for i in order], trajs, run_config, progress, extra)
    for c in cards:
        orig, name = split_id(c["id"])
        row = audit["perturbations"].get(name) if name else None
        if row is not None:
            c["notes"].insert(0, f"counterfactual of {orig} ({name}: {row['change']}; a robust verifier: "
                                 f"{row['robust']}). Its original: review.html#id={orig}; search {orig} to see "
                                 "them together")
    if total > len(chosen):
        notes.insert(0, f"showing {len(chosen)} of the {total} originals (those with a flip or a newly unparsed "
                        "counterfactual first, then the others in data order) and their counterfactuals; audit.json "
                        "and report.md count them all")
    notes.insert(0, "each original is followed by its counterfactuals (ids ID~PERTURBATION), originals with a "
                    "flip first; a counterfactual's 'compared' line is its original's verdict")
    v = audit.get("verdict")
    if v:  # the report's top (report.md): the bottom line, then each perturbation's verdict
        notes[:0] = [f"bottom line: {v['bottom_line']}", "verdicts (rule in report.md): " + ", ".join(
            f"{name} {verdict}" for name, verdict in v["perturbations"].items())]
    meta = {"title": f"Verifier audit: {audit['run'].get('model')}", "model": audit["run"].get("model"),
            "data": audit["run"].get("data"), "created": audit["run"].get("created")}
    return write_review(out, cards, meta, notes, progress)
