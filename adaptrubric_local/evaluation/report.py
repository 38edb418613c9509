"""Human-readable output of the evaluation harness: markdown reports and PNG plots (matplotlib).

Takes the plain dicts that `metrics`, `benchmark_figures` and `tts` compute plus the run metadata; knows nothing about
how they were computed.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from .benchmark_figures import md_head, md_row, render_table
from .vote_rules import render_table as render_vote_rules


def fmt(x: float | None, digits: int = 1, signed: bool = False) -> str:
    """A percentage (with its sign: `signed`) or '-' when undefined."""
    return "-" if x is None else f"{x:{'+' if signed else ''}.{digits}f}"


@contextmanager
def _figure(path: Path, *grid, **kw):
    """(figure, axes) of `plt.subplots(*grid, **kw)`, saved to `path` and closed at the end of the block."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(*grid, **kw)
    yield fig, axes
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def run_block(run: dict) -> list[str]:
    """The 'what produced this' lines every report starts with."""
    keys = [("data", "data"), ("verdicts", "verdicts"), ("model", "model"), ("adapter", "adapter"),
            ("bank_sha", "rubric bank sha"), ("max_images", "image budget (screenshots)"),
            ("max_visual_tokens", "visual-token budget"), ("router", "router"), ("coarse", "coarse rubric"),
            ("fine", "fine cues"), ("ablation", "ablation setting"), ("package_version", "adaptrubric-local"),
            ("created", "created")]
    lines = [f"- {label}: `{run.get(k)}`" for k, label in keys if k in run]
    for f in (run.get("labels") or {}).get("files", []):  # labels files applied over the data's labels
        lines.append(f"- labels file: `{f['path']}` (sha256 `{f['sha256'][:16]}...`, {f['labels']} label(s), "
                     f"{f['unsure']} unsure)")
    return lines


def _metrics(r: dict) -> list[str]:
    return [fmt(r[k]) for k in ("acc", "prec", "rec", "f1", "fpr")]


def coverage_markdown(notes: list[str] | None) -> list[str]:
    """The report section saying what was evaluated when it is not simply every trajectory of the data."""
    return ["## What was evaluated", "", *[f"- **{n}**" for n in notes], ""] if notes else []


def metrics_markdown(m: dict, run: dict, coverage: list[str] | None = None) -> str:
    """report.md for `adaptrubric eval`; `coverage`: sentences on what the verdicts cover of the data."""
    o, e = m["overall"], m.get("efficiency", {})
    s, u, missing = o["scored_only"], o["unanswered_as_fail"], o.get("missing", 0)
    lines = ["# Reward-model evaluation", "", "## Run", *run_block(run), "", *coverage_markdown(coverage),
             "## Overall (every trajectory classified, as in the paper)", "",
             *md_head("n", "scored", "unparsed", "errors", "missing", "Acc", "Prec", "Rec", "F1", "FPR"),
             md_row(o["n"], o["scored"], o["unparsed"], o["errors"], missing, *_metrics(o)), "",
             f"Percentages over all {o['n']} labelled trajectories. The {o['unparsed']} unparsed and {o['errors']} "
             f"error verdict(s)" + (f" and the {missing} trajectories without a verdict (missing)" if missing else "")
             + f" count as predicted failures (SCORE 0): {u['fn']} of them are successful trajectories "
             f"(false negatives), {u['tn']} failed ones (true negatives). '-' marks an undefined value (no positives, "
             "or none predicted).", ""]
    if o["n"] and not o["scored"]:
        lines += ["**No verdict was scored**: these numbers are those of predicting failure for every trajectory "
                  "and say nothing about the verifier.", ""]
    lines += ["### Scored verdicts only", "",
              *md_head("scored", "Acc", "Prec", "Rec", "F1", "FPR", "Acc (unparsed/errors as wrong, over n)"),
              md_row(s["n"], *_metrics(s), fmt(o["acc_strict"])), "",
              "Not comparable with the paper's figures when some verdicts are unparsed or errors.", ""]
    if o.get("hit_cap"):
        lines += [f"{o['hit_cap']} verifier output(s) stopped at the token cap.", ""]
    if o.get("hit_context"):
        lines += [f"{o['hit_context']} verifier output(s) were cut by the model's context length (max_model_len) "
                  "before the token cap.", ""]
    if m.get("benchmark"):
        lines += ["## Benchmark figures (Table 1 layout, NPV/TNR, success rates, kappa, MCC, intervals)", "",
                  render_table(m["benchmark"])]
    if m.get("vote_rules"):
        lines += ["## Vote rules (`--votes k`: every rule from the one run's votes)", "",
                  render_vote_rules(m["vote_rules"])]
    lines += ["## Per platform (Table 1 layout; unparsed/errors as predicted failures)", "",
              *md_head("platform", "n", "positives", "Acc", "Prec", "Rec", "F1", "FPR", "unparsed", "errors",
                     "Acc (scored only)", left=1),
              *(md_row(p, r["n"], r["positives"], *_metrics(r), r["unparsed"], r["errors"], fmt(r["scored_only"]["acc"]))
                for p, r in m["per_platform"].items())]
    c = o["confusion"]
    lines += ["", "## Confusion matrix (all trajectories; unparsed/errors as predicted 0)", "",
              "| | predicted 1 | predicted 0 |", "|---|---:|---:|",
              f"| label 1 | {c['tp']} | {c['fn']} |", f"| label 0 | {c['fp']} | {c['tn']} |", "",
              "![confusion matrix](confusion.png)", "", "![per-platform metrics](per_platform.png)", ""]
    lines += probability_markdown(m.get("probability"))
    if m.get("review"):
        lines += ["Every trajectory, with its screenshots, evidence and verifier output: "
                  f"[{m['review']}]({m['review']}) (open it in a browser; it works offline).", ""]
    if e:
        lines += ["## Efficiency (Table 5 layout)", "",
                  *md_head("trajectories", "calls", "calls/traj", "tokens", "tokens/traj", "s/traj", "images/traj"),
                  md_row(e["trajectories"], *(fmt(e.get(k), d) for k, d in (("calls", 0), ("calls_per_traj", 2),
                       ("tokens", 0), ("tokens_per_traj", 0), ("s_per_traj", 3), ("images_per_traj", 1)))), "",
                  f"Calls and tokens: {e.get('accounting', 'verifier calls only')}"
                  + (f"; over the {e['trajectories']} trajectories the verifier answered, {e['errors']} error "
                     "line(s) counted apart" if e.get("errors") else "") + ".", ""]
    if m.get("unlabelled"):
        lines.append(f"{m['unlabelled']} trajectory(ies) had no label and were left out of the figures.")
    return "\n".join(lines) + "\n"


def plot_confusion(c: dict, path: Path, title: str) -> None:
    """Confusion-matrix heat map with counts."""
    grid = [[c["tp"], c["fn"]], [c["fp"], c["tn"]]]
    hi = max(max(r) for r in grid) or 1
    with _figure(path, figsize=(5.2, 4.2), dpi=120) as (fig, ax):
        im = ax.imshow(grid, cmap="Blues", vmin=0)
        for i in range(2):
            for j in range(2):
                ax.text(j, i, str(grid[i][j]), ha="center", va="center", fontsize=14,
                        color="white" if grid[i][j] > hi / 2 else "black")
        ax.set_xticks([0, 1], ["predicted\nsuccess (1)", "predicted\nfailure (0)"])
        ax.set_yticks([0, 1], ["label\nsuccess (1)", "label\nfailure (0)"])
        ax.set_xlabel("verifier verdict (unparsed/error = predicted failure)")
        ax.set_ylabel("ground-truth label")
        ax.set_title(title, fontsize=9, wrap=True)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="trajectories")


def plot_per_platform(per: dict, path: Path, title: str) -> None:
    """Grouped bars of Acc / Prec / Rec / F1 per platform."""
    names = list(per) or ["(none)"]
    keys = [("acc", "Accuracy"), ("prec", "Precision"), ("rec", "Recall"), ("f1", "F1")]
    width = 0.8 / len(keys)
    with _figure(path, figsize=(max(5.0, 1.6 * len(names) + 2), 3.8), dpi=120) as (_, ax):
        for k, (key, label) in enumerate(keys):
            vals = [per[p][key] if p in per and per[p][key] is not None else 0.0 for p in names]
            bars = ax.bar([i + (k - 1.5) * width for i in range(len(names))], vals, width, label=label)
            for b, p in zip(bars, names):
                if p in per and per[p][key] is None:
                    ax.text(b.get_x() + b.get_width() / 2, 1, "n/a", ha="center", va="bottom", fontsize=7,
                            rotation=90)
        ax.set_xticks(range(len(names)), [f"{p}\n(n={per[p]['n']}, scored {per[p]['scored']})" if p in per else p
                                          for p in names])
        ax.set_ylim(0, 105)
        ax.set_ylabel("%")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.22))


def plot_tts(res: dict, path: Path, title: str) -> None:
    """SR@N curves like the paper's Figure 4: EarlyStop and BestOfN panels with Random and Oracle."""
    ns = sorted(res["random"])
    panels = [("EarlyStop SR@N", [("earlystop", "EarlyStop", "o-")]),
              ("BestOfN SR@N", [("bestofn", "BestOfN (last tie)", "s-"), ("bestofn_soft", "BestOfN (p_success ties)", "^--")])]
    if not res.get("informative", True):
        title += "\nno candidate was scored: the curves reflect candidate order only"
    with _figure(path, 1, 2, figsize=(10, 3.9), dpi=120, sharey=True) as (fig, axes):
        for ax, (name, series) in zip(axes, panels):
            for key, label, style in series:
                ax.plot(ns, [res[key][n] for n in ns], style, label=label)
            ax.plot(ns, [res["random"][n] for n in ns], ":", color="gray", label="Random (expected)")
            ax.plot(ns, [res["oracle"][n] for n in ns], "--", color="black", label="Oracle")
            ax.set_title(name, fontsize=10)
            ax.set_xlabel("N (candidates per task)")
            ax.set_xticks(ns)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        axes[0].set_ylabel("task success rate (%)")
        fig.suptitle(title, fontsize=10)


def tts_markdown(res: dict, run: dict, coverage: list[str] | None = None) -> str:
    """report.md for `adaptrubric tts`; `coverage`: sentences on what the verdicts cover of the data."""
    ns, p = sorted(res["random"]), res["pool"]
    lines = ["# Reward-guided test-time scaling", "", "## Run", *run_block(run), "", *coverage_markdown(coverage),
             f"Candidates grouped by task_id and shuffled per task, each task with its own generator "
             f"(seed {run.get('seed', 42)}). EarlyStop: first predicted success, else the last scanned. BestOfN: "
             "last tied best (soft: ties broken by p_success). Random: expected value of a uniform pick from the "
             "prefix. Unparsed/error verdicts and candidates without a verdict (missing) never count as predicted "
             "success.", ""]
    if not res.get("informative", True):
        lines += [f"**The verdicts carry no information**: {res.get('note', 'no candidate was scored')}.", ""]
    lines += ["## Pool composition (Table 12 layout)", "",
              "| tasks | trials/task | all-fail | all-pass | mixed | trial SR | Oracle@max | Random@1 | headroom |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
              f"| {p['tasks']} | {p['trials_per_task']['min']}-{p['trials_per_task']['max']} | "
              f"{p['all_fail']} ({fmt(p['all_fail_pct'])}%) | {p['all_pass']} ({fmt(p['all_pass_pct'])}%) | "
              f"{p['mixed']} ({fmt(p['mixed_pct'])}%) | {fmt(p['trial_sr'], 2)} | {fmt(p['oracle_at_max'], 2)} | "
              f"{fmt(p['random_at_1_expected'], 2)} | {p['headroom']:+.2f} |", "",
              "Headroom is Oracle@max minus Random@1, as Table 12's caption defines it; Random@1 is the expected "
              "success of one uniformly chosen trial per task, which equals the trial SR (pooled over trials) when "
              "every task has the same number of trials.", "",
              "## SR@N (%)", "", *md_head("N", "EarlyStop", "BestOfN", "BestOfN (soft)", "Random", "Oracle"),
              *(md_row(n, *(fmt(res[k][n], 2) for k in ("earlystop", "bestofn", "bestofn_soft", "random", "oracle")))
                for n in ns)]
    last, g = ns[-1], res.get("gain_over_random")
    if g:
        lines += ["", f"Gains over Random at N={last}: EarlyStop {g['earlystop'][last]:+.2f}, "
                  f"BestOfN {g['bestofn'][last]:+.2f}, BestOfN (soft) {g['bestofn_soft'][last]:+.2f} points."]
    else:
        lines += ["", "No gains over Random are reported: with no scored verdict, EarlyStop and BestOfN pick by "
                  "position only."]
    lines += ["", "![SR@N](tts.png)", ""]
    if c := res.get("classification"):
        lines += [f"Verdicts on this pool (unparsed/errors/missing as predicted failures): Acc {fmt(c['acc'])}, "
                  f"F1 {fmt(c['f1'])}, FPR {fmt(c['fpr'])}, scored {c['scored']}, unparsed {c['unparsed']}, "
                  f"errors {c['errors']}, missing {c.get('missing', 0)}."]
    return "\n".join(lines) + "\n"


def ablation_markdown(rows: dict, run: dict) -> str:
    """report.md for `adaptrubric ablate` (Table 4 layout)."""
    from ..stages.fusion import ABLATION_INPUTS, ABLATIONS  # the rows and what the verifier sees in each

    labels = {"full": "Full (Coarse + Fine)", "no_fine": "w/o Fine", "no_coarse": "w/o Coarse", "no_both": "w/o Both"}
    lines = ["# Ablation of rubric construction", "", "## Run", *run_block(run), "",
             *md_head("Coarse", "Fine", "Setting", "Acc", "ΔAcc", "F1", "ΔF1", "scored", "unparsed", "errors", left=3)]
    for key, r in rows.items():
        o, d = r["overall"], r.get("delta", {})
        lines.append(md_row(*("yes" if on else "no" for on in ABLATIONS[key]), labels[key], fmt(o["acc"]),
                          fmt(d.get("acc")), fmt(o["f1"]), fmt(d.get("f1")), o.get("scored", "-"), o["unparsed"],
                          o["errors"]))
    lines += ["", "Acc and F1 classify every trajectory (unparsed/errors as predicted failures), as the paper does; "
              "Δ is the difference to the full model in points ('-' for the full model or when undefined).", "",
              "## What the verifier sees in each row", ""]
    lines += [f"- {labels[key]}: {ABLATION_INPUTS.get(key, '(not described)')}" for key in rows]
    return "\n".join(lines) + "\n"


def probability_markdown(prob: dict | None) -> list[str]:
    """The report section on p_success: ranking and calibration figures and the reliability diagram."""
    if not prob:
        return ["## Probabilities", "", "No labelled verdict carries a probability (p_success), so AUROC, AUPRC, Brier "
                "score and ECE are not reported.", ""]
    lines = ["## Probabilities (is p_success any good?)", "",
             *md_head("probability", "n", "positives", "AUROC", "AUPRC", "Brier", "ECE (15 bins)", "labelled without it",
                    left=1)]
    lines += [md_row(name, s["n"], s["positives"], fmt(s["auroc"], 3), fmt(s["auprc"], 3), fmt(s["brier"], 4),
                   fmt(s["ece"], 4), s["without_probability"]) for name, s in prob.items()]
    lines += ["", "Over labelled verdicts that carry the probability (of any status). AUROC and AUPRC measure ranking "
              "(ties count one half; AUPRC is average precision); Brier is the mean squared error of the probability; "
              "ECE is the count-weighted gap between mean probability and fraction of successes over 15 equal-width "
              "bins. A diagonal reliability diagram means 0.9 is right 90% of the time; `adaptrubric calibrate` fits "
              "a temperature when it is not.", "", "![reliability diagram](calibration.png)", ""]
    return lines


def plot_reliability(series: list[tuple[str, dict]], path: Path, title: str) -> None:
    """Reliability diagram: per-bin fraction of successes against mean probability (one line per
    series, marker area by count), the diagonal, and a histogram of the probabilities below."""
    with _figure(path, 2, 1, figsize=(5.6, 6.2), dpi=120, sharex=True,
                 gridspec_kw={"height_ratios": [3, 1]}) as (_, (ax, hist)):
        ax.plot([0, 1], [0, 1], ":", color="gray", label="perfect calibration")
        if not series:
            ax.text(0.5, 0.5, "no labelled verdict with a probability", ha="center", va="center")
        for k, (name, s) in enumerate(series):
            rows = s["reliability"]
            ax.plot([r["mean_p"] for r in rows], [r["frac_pos"] for r in rows], "o-",
                    label=f"{name} (ECE {s['ece']:.3f}, n={s['n']})", markersize=4, color=f"C{k}")
            width = 1.0 / s.get("ece_bins", 15) / max(1, len(series))
            hist.bar([r["lo"] + k * width for r in rows], [r["n"] for r in rows], width=width, align="edge",
                     color=f"C{k}", alpha=0.7)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_ylabel("fraction of successes (label 1)")
        ax.set_title(title, fontsize=9, wrap=True)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
        hist.set_xlabel("predicted probability of success (15 equal-width bins)")
        hist.set_ylabel("verdicts")
