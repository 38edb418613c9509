"""The audit's figures and report: per perturbation, the trajectories it applied to, the verdicts it
moved 0 -> 1 and 1 -> 0 (95% Wilson intervals), the mean change of `p_success`, the newly unparsed
verdicts, EVIDENCE_SUFFICIENT: no before and after, each clause checked by verdict.py's rule, and the
ids of every flip: `audit.json`, `report.md` and `flips.png`; `compare` puts two audits side by side.

A flip rate is over the pairs whose original and counterfactual both parsed and whose original said
0 (for 0 -> 1) or 1 (for 1 -> 0); a counterfactual that did not parse is newly unparsed, not a flip.
The counting is tally.py's, line by line. Knows nothing about engines or how the counterfactuals
were made beyond their ids.
"""
from __future__ import annotations

import json
from pathlib import Path

from .perturbations import Perturbation
from .tally import OriginalVerdicts, PairCounts, count_pairs
from .verdict import NOT_ROBUST, ROBUST, TOO_FEW, accuracy_of, accuracy_text, judge, share, verdicts_of, wilson


def rate(k: int, n: int) -> dict:
    """{k, n, rate, ci95} (rate and interval None when n is 0)."""
    return {"k": k, "n": n, "rate": k / n if n else None, "ci95": wilson(k, n)}


def row_of(p: Perturbation, applied: int, c: PairCounts, engine_options: dict | None = None) -> dict:
    """One perturbation's row from its pair counts (tally.py)."""
    row = {"change": p.change, "robust": p.robust, "expect": p.expect, "label": p.label,
           "engine_options": engine_options, "applied": applied, "compared": c.compared,
           "flips_0_1": rate(len(c.up), c.zeros), "flips_1_0": rate(len(c.down), c.ones),
           "mean_dp_success": c.dp_sum / c.n_dp if c.n_dp else None, "n_dp": c.n_dp,
           "newly_unparsed": c.newly_unparsed, "errors": c.errors, "missing": c.missing,
           "original_not_parsed": c.original_not_parsed, "insufficient": {"before": c.before, "after": c.after},
           "flip_ids": {"0->1": c.up, "1->0": c.down}}
    row["verdict"], row["clauses"] = judge(p, row)
    return row


def _originals(ov: OriginalVerdicts) -> tuple[dict, dict, dict]:
    """(originals' summary, accuracy, measured cost of the originals) from their arrays."""
    o = ov.originals
    traj, has = o.parsed, o.parsed & (ov.status >= 0)
    labelled = traj & (o.label >= 0)
    ok = labelled & (ov.status == 0)
    n = int(has.sum())
    summary = {"n": int(traj.sum()), "scored": int((has & (ov.status == 0)).sum()),
               "unparsed": int((has & (ov.status == 1)).sum()), "errors": int((has & (ov.status == 2)).sum()),
               "ones": int((has & (ov.score == 1)).sum()), "zeros": int((has & (ov.score == 0)).sum()),
               "labelled_1": int((traj & (o.label == 1)).sum()), "labelled_0": int((traj & (o.label == 0)).sum())}
    acc = accuracy_of(int((ov.score[ok] == o.label[ok]).sum()), int(ok.sum()), int((o.label[ok] == 1).sum()),
                        unlabelled=int(traj.sum() - labelled.sum()),
                        unparsed=int((labelled & (ov.status == 1)).sum()),
                        errors=int((labelled & (ov.status == 2)).sum()),
                        unscored=int((labelled & (ov.status < 0)).sum()))
    cost = {"n": n, "calls_per_traj": float(ov.calls[has].sum()) / max(1, n),
            "tokens_per_traj": float(ov.tokens[has].sum()) / max(1, n)}
    return summary, acc, cost


def write_report(out: Path, perturbations: list[Perturbation], originals, run: dict, plan: dict,
                 files: dict[str, str], cf_files: dict[str, Path], settings: dict[str, dict] | None = None) -> dict:
    """Measure every perturbation from the verdict files, read line by line (`files`: "verdicts" -> the
    originals' and the changed trajectories' file, NAME -> a setting perturbation's, scored with the
    engine options `settings[NAME]`; `cf_files`: NAME -> its counterfactuals' file; `originals`:
    streamed.Originals) and write audit.json, report.md, flips.png; returns the audit."""
    out = Path(out)
    ov = OriginalVerdicts(originals, Path(files["verdicts"]))
    rows, measured = {}, {}
    for p in perturbations:
        c = count_pairs(Path(files.get(p.name, files["verdicts"])), Path(cf_files[p.name]), p.name, ov)
        rows[p.name] = row_of(p, plan["applied"][p.name], c, (settings or {}).get(p.name))
        n = max(1, c.scored)
        measured[p.name] = {"n": c.scored, "calls_per_traj": c.calls / n, "tokens_per_traj": c.tokens / n}
    summary, acc, cost = _originals(ov)
    audit = {"verdict": verdicts_of(acc, rows), "run": run, "originals": summary,
             "cost": {"planned": plan, "measured": {"originals": cost, **measured}}, "verdict_files": files,
             "perturbations": rows}
    (out / "audit.json").write_text(json.dumps(audit, indent=2) + "\n")
    (out / "report.md").write_text(markdown(audit))
    plot(out / "flips.png", [(run.get("model") or "verifier", audit)])
    return audit


# ----------------------------------------------------------------------------- text
def pct(r: dict) -> str:
    """A `rate` dict as `verdict.share` writes it."""
    return share(r["k"], r["n"])


def _dp(x: float | None) -> str:
    return "-" if x is None else f"{x:+.3f}"


def _ids(ids: list[str], show: int = 40) -> str:
    more = f" ... ({len(ids) - show} more in audit.json)" if len(ids) > show else ""
    return ", ".join(f"`{i}`" for i in ids[:show]) + more


def _verdict(row: dict) -> str:
    """A row's verdict as the tables show it (an audit.json written before verdicts: its old yes/no)."""
    v = row.get("verdict") or {True: ROBUST, False: NOT_ROBUST, None: TOO_FEW}[row.get("meets")]
    return f"**{v}**" if v == NOT_ROBUST else v


def top(audit: dict) -> list[str]:
    """The report's first lines: the accuracy, each perturbation's verdict with its clauses, the bottom
    line and the rule they follow (verdict.py)."""
    v, rows = audit["verdict"], audit["perturbations"]
    lines = [f"**Bottom line: {v['bottom_line']}**", "", f"- {accuracy_text(v['accuracy'])}"]
    for name, r in rows.items():
        checks = "; ".join(f"{c['says']}: {c['shown']}, {c['result']}" for c in r["clauses"])
        lines.append(f"- `{name}`: {_verdict(r)} ({checks})")
    return [*lines, "", f"How these are decided: {v['rule']}"]


def markdown(audit: dict) -> str:
    """report.md: the verdicts (`top`), the run, the cost, the table, then the flips' ids."""
    run, o, rows = audit["run"], audit["originals"], audit["perturbations"]
    plan = audit["cost"]["planned"]
    adapter = f", adapter `{run['adapter']}`" if run.get("adapter") else ""
    shots = plan["screenshots_originals"] + plan["screenshots_counterfactuals"]
    lines = [f"# Verifier audit: {run.get('model')}", "", *top(audit), "",
             f"Data: `{run['data']}`, {o['n']} trajectories ({o['labelled_1']} labelled 1, {o['labelled_0']} "
             f"labelled 0); originals scored: {o['ones']} SCORE 1, {o['zeros']} SCORE 0, {o['unparsed']} unparsed, "
             f"{o['errors']} errors.",
             f"Settings: router {run['router']}, fine cues {'on' if run['fine'] else 'off'}, coarse rubric "
             f"{'on' if run['coarse'] else 'off'}, up to {run['max_images']} screenshots, visual tokens "
             f"{run.get('max_visual_tokens') or 'native'}{adapter}.", "",
             f"Cost: {plan['audit_calls']} model calls ({plan['calls_ratio']:.1f}x scoring the data once, "
             f"{plan['score_calls']}), {shots} screenshots ({plan['screenshots_ratio']:.1f}x). Measured per "
             "trajectory: "
             + "; ".join(f"{k} {v['calls_per_traj']:.2f} calls, {v['tokens_per_traj']:.0f} tokens"
                         for k, v in audit["cost"]["measured"].items() if v["n"]) + ".", "",
             "A flip rate is over the pairs whose original and counterfactual both parsed: 0 -> 1 of the originals "
             "that said 0, 1 -> 0 of those that said 1 (95% Wilson intervals)."
             + (f" **{o['n'] - o['scored']} of the {o['n']} originals have no parsed verdict** ({o['unparsed']} "
                f"unparsed, {o['errors']} errors): their counterfactuals are compared with nothing."
                if o["scored"] < o["n"] else ""), "",
             "| perturbation | change | a robust verifier | applied | 0 -> 1 | 1 -> 0 | mean change of p_success | "
             "newly unparsed | EVIDENCE_SUFFICIENT: no before -> after | verdict |",
             "|---|---|---|---:|---|---|---:|---:|---|---|"]
    for name, r in rows.items():
        lines.append(f"| `{name}` | {r['change']} | {r['robust']} | {r['applied']} | {pct(r['flips_0_1'])} | "
                     f"{pct(r['flips_1_0'])} | {_dp(r['mean_dp_success'])} | {len(r['newly_unparsed'])} | "
                     f"{r['insufficient']['before']} -> {r['insufficient']['after']} | {_verdict(r)} |")
    lines += ["", "## Flips", ""]
    for name, r in rows.items():
        got = [(k, ids) for k, ids in (("0 -> 1", r["flip_ids"]["0->1"]), ("1 -> 0", r["flip_ids"]["1->0"]),
                                       ("newly unparsed", r["newly_unparsed"]), ("errors", r["errors"]),
                                       ("no verdict", r["missing"])) if ids]
        lines.append(f"- `{name}`: " + ("; ".join(f"{k}: {_ids(ids)}" for k, ids in got) if got else "none"))
    roots = " ".join(f"--image-root {r}" for r in run.get("image_roots", []))
    lines += ["", "## The counterfactuals as data", "",
              "`counterfactuals.jsonl` holds every changed trajectory (ids `ID~PERTURBATION`, screenshots referenced "
              "where they are); score it with any engine, e.g. a remote judge:", "",
              f"    adaptrubric score {run['out']}/counterfactuals.jsonl {roots} --openai-url URL --model NAME "
              f"--out judge.jsonl", ""]
    settings = {k: r["engine_options"] for k, r in rows.items() if r["engine_options"]}
    for k, opts in settings.items():
        flags = " ".join(f"--{f.replace('_', '-')} {v}" for f, v in opts.items())
        lines.append(f"`counterfactuals.{k}.jsonl`: the trajectories of `{k}`, scored with `{flags}`.")
    lines += ["", "`review.html` pairs each counterfactual with its original (flips first).", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- compare
def load_audit(folder: str | Path) -> dict:
    """The audit.json of an audit folder (or the file itself), with a clear error when there is none."""
    p = Path(folder)
    p = p / "audit.json" if p.is_dir() else p
    if not p.is_file():
        raise ValueError(f"{folder}: no audit.json (the folder an `adaptrubric audit` run wrote)")
    return json.loads(p.read_text())


def _r(r: dict) -> str:
    return "-" if r["rate"] is None else f"{100 * r['rate']:.0f}% ({r['k']}/{r['n']})"


def _diff(a: dict, b: dict) -> str:
    return "-" if a["rate"] is None or b["rate"] is None else f"{100 * (b['rate'] - a['rate']):+.0f} pts"


def compare(a: dict, b: dict, name_a: str = "A", name_b: str = "B") -> str:
    """Two audits side by side (markdown): each one's accuracy and bottom line, then per perturbation both
    sides' flip rates, B - A, mean changes of p_success, newly unparsed and each one's verdict."""
    ma, mb = a["run"].get("model"), b["run"].get("model")
    lines = [f"# Verifier audits side by side: {name_a} ({ma}) and {name_b} ({mb})", ""]
    if a["run"].get("data") != b["run"].get("data"):
        lines += [f"Note: the audits are of different data ({a['run'].get('data')} and {b['run'].get('data')}).", ""]
    for name, x in ((name_a, a), (name_b, b)):
        v = x.get("verdict")  # absent from an audit.json written before the verdicts
        lines.append(f"- {name}: " + (f"{accuracy_text(v['accuracy'])}; bottom line: {v['bottom_line']}" if v
                                      else "no verdicts (an audit written before them: run it again)"))
    lines.append("")
    a_b, b_a = f"{name_a} / {name_b}", f"{name_b} - {name_a}"
    lines += [f"| perturbation | applied {a_b} | 0 -> 1 {name_a} | 0 -> 1 {name_b} | {b_a} | 1 -> 0 {name_a} | "
              f"1 -> 0 {name_b} | {b_a} | mean change of p_success {a_b} | newly unparsed {a_b} | verdict {a_b} |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in list(dict.fromkeys([*a["perturbations"], *b["perturbations"]])):
        ra, rb = a["perturbations"].get(name), b["perturbations"].get(name)
        if ra is None or rb is None:
            lines.append(f"| `{name}` | only in {name_a if rb is None else name_b} | | | | | | | | | |")
            continue
        lines.append(f"| `{name}` | {ra['applied']} / {rb['applied']} | {_r(ra['flips_0_1'])} | "
                     f"{_r(rb['flips_0_1'])} | {_diff(ra['flips_0_1'], rb['flips_0_1'])} | {_r(ra['flips_1_0'])} | "
                     f"{_r(rb['flips_1_0'])} | "
                     f"{_diff(ra['flips_1_0'], rb['flips_1_0'])} | {_dp(ra['mean_dp_success'])} / "
                     f"{_dp(rb['mean_dp_success'])} | {len(ra['newly_unparsed'])} / {len(rb['newly_unparsed'])} | "
                     f"{_verdict(ra)} / {_verdict(rb)} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- plot
def plot(path: Path, audits: list[tuple[str, dict]]) -> Path:
    """flips.png: per perturbation, each audit's 0 -> 1 and 1 -> 0 rates and its share of newly unparsed
    verdicts, each with its 95% interval and k/n above the bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    names = list(dict.fromkeys(n for _, a in audits for n in a["perturbations"]))
    kinds = (("flips_0_1", "0 -> 1"), ("flips_1_0", "1 -> 0"), ("unparsed", "newly unparsed"))
    bars = [(label, audit, kind, what) for label, audit in audits for kind, what in kinds]
    width = 0.84 / max(1, len(bars))
    fig, ax = plt.subplots(figsize=(max(7.0, (0.45 * len(bars) + 0.6) * len(names) + 1.5), 4.6))
    colors = ["#c0392b", "#2471a3", "#95a5a6", "#e59866", "#7fb3d5", "#d5dbdb"]
    handles = []
    for k, (label, audit, kind, what) in enumerate(bars):
        color = colors[k % len(colors)]
        handles.append(Patch(color=color, label=what if len(audits) == 1 else f"{label}: {what}"))
        for i, n in enumerate(names):
            row = audit["perturbations"].get(n)  # a bar: a flip rate, or the newly unparsed over those applied
            r = row and (row[kind] if kind != "unparsed" else rate(len(row["newly_unparsed"]), row["applied"]))
            if not r or r["rate"] is None:
                continue
            x = i - 0.42 + width * (k + 0.5)
            lo, hi = r["ci95"]
            ax.bar([x], [r["rate"]], width, yerr=[[r["rate"] - lo], [hi - r["rate"]]], capsize=2, color=color,
                   ecolor="#555555")
            ax.text(x, hi + 0.015, f"{r['k']}/{r['n']}", ha="center", va="bottom", fontsize=6.5, rotation=90)
    unparsed = [f"{label}: {a['originals']['n'] - a['originals']['scored']} of {a['originals']['n']}"
                for label, a in audits if a["originals"]["scored"] < a["originals"]["n"]]
    if unparsed:
        ax.text(0.99, 0.97, "originals without a parsed verdict (their pairs not compared): " + "; ".join(unparsed),
                transform=ax.transAxes, ha="right", va="top", fontsize=8, color="#7b241c")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20, ha="right")
    ax.set_ylim(0, 1.18)
    ax.set_ylabel("share (95% Wilson interval)")
    ax.set_title("Verdicts moved by each perturbation: 0 -> 1 of the 0s, 1 -> 0 of the 1s, newly unparsed of all",
                 fontsize=10)
    ax.legend(handles=handles, fontsize=8, loc="upper left", ncol=len(audits))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_compare(out: Path, folder_a: str | Path, folder_b: str | Path) -> str:
    """compare.md and compare.png in `out` for the audits in two folders; returns the markdown."""
    a, b = load_audit(folder_a), load_audit(folder_b)
    text = compare(a, b, "A", "B") + f"\nA: `{folder_a}`, B: `{folder_b}`\n"
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.md").write_text(text)
    plot(out / "compare.png", [("A", a), ("B", b)])
    return text
