"""What a cascade's verdict lines say about it: how many went to the judge and why, what the judge
cost against judge-only scoring, and, from the spot checks, the student's agreement with the judge on
this data (95% Wilson interval) and the cascade's estimated agreement with judge-only scoring.

The estimate: a line the judge decided agrees with judge-only scoring by construction; a line the
student decided agrees at the rate the student agreed with the judge on the spot checks that nothing
else sent (a random sample of exactly the lines the student would decide). Reads line dicts (a
verdict file's last line per id); knows nothing about engines or flags.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..audit.verdict import wilson


def agree(d: dict) -> bool | None:
    """Whether the student's verdict agrees with the judge's on a line the judge answered (an unparsed
    or error student verdict does not); None when the judge gave no verdict."""
    s, j = d.get("student") or {}, d.get("judge") or {}
    if j.get("status") != "ok":
        return None
    return s.get("status") == "ok" and s.get("score") == j.get("score")


def spot_sample(lines: list[dict], only: bool) -> list[bool]:
    """Agreement on the spot-checked lines the judge answered (`only`: those nothing else sent)."""
    out = []
    for d in lines:
        why = d.get("escalated") or []
        if "spot_check" in why and (not only or why == ["spot_check"]):
            a = agree(d)
            if a is not None:
                out.append(a)
    return out


def cascade_summary(lines: Iterable[dict]) -> dict:
    """The `cascade` section of a run summary, from its verdict lines."""
    lines = [d for d in lines if d.get("decided_by")]
    n = len(lines)
    why = Counter(r for d in lines for r in d.get("escalated") or [])
    sent = [d for d in lines if d.get("escalated")]
    by_judge = sum(d["decided_by"] == "judge" for d in lines)
    failed = [d for d in lines if d.get("judge_error")]
    judged = [d["judge"] for d in sent if d.get("judge")]
    calls = sum(j.get("cost_calls") or 0.0 for j in judged)
    tokens = sum(j.get("cost_tokens") or 0.0 for j in judged)
    answered = [j for j in judged if j.get("status") == "ok"]
    per_call = (sum(j.get("cost_calls") or 0.0 for j in answered) / len(answered)) if answered else None
    per_tok = (sum(j.get("cost_tokens") or 0.0 for j in answered) / len(answered)) if answered else None
    spot_all, spot_only = spot_sample(lines, only=False), spot_sample(lines, only=True)
    student_ci = wilson(sum(spot_all), len(spot_all))
    out = {
        "trajectories": n,
        "decided_by": {"student": n - by_judge, "judge": by_judge},
        "sent_to_judge": len(sent),
        "judge_share": len(sent) / n if n else None,
        "why": {r: why[r] for r in ("error", "unparsed", "evidence_insufficient", "band", "spot_check") if why[r]},
        "judge_failed": len(failed),
        "judge_failed_by": dict(Counter(d["judge_error"].split(":", 1)[0] for d in failed)),
        "judge_calls": calls,
        "judge_tokens": tokens,
        "judge_only_calls_est": per_call * n if per_call is not None else None,
        "judge_only_tokens_est": per_tok * n if per_tok is not None else None,
        "spot_checks": {"n": len(spot_all), "agree": sum(spot_all),
                        "student_agreement": sum(spot_all) / len(spot_all) if spot_all else None,
                        "ci95": student_ci},
    }
    out["cascade_agreement_est"] = estimate(n, n - by_judge, spot_only)
    return out


def estimate(n: int, n_student: int, sample: list[bool]) -> dict | None:
    """The cascade's estimated agreement with judge-only scoring and its 95% interval: the `n_student`
    lines the student decided agree at the sample's rate, the others by construction."""
    if not n:
        return None
    if not sample:
        return {"agreement": None, "ci95": None, "n_sample": 0,
                "note": "no spot check fell on a line the student decided: raise --spot-check"}
    r = sum(sample) / len(sample)
    lo, hi = wilson(sum(sample), len(sample))
    judge = n - n_student
    return {"agreement": (judge + n_student * r) / n, "ci95": [(judge + n_student * lo) / n,
                                                                 (judge + n_student * hi) / n],
            "n_sample": len(sample), "student_rate": r}


def describe(c: dict) -> str:
    """The cascade section as one line of text for stderr."""
    est = c.get("cascade_agreement_est") or {}
    spot = c["spot_checks"]
    why = ", ".join(f"{k} {v}" for k, v in c["why"].items()) or "none"
    text = (f"cascade: {c['sent_to_judge']} of {c['trajectories']} trajectories sent to the judge ({why}); "
            f"decided by the judge {c['decided_by']['judge']}, the judge failed on {c['judge_failed']}")
    if spot["n"]:
        lo, hi = spot["ci95"]
        text += f"; spot checks {spot['agree']}/{spot['n']} agree (95% {lo:.2f}-{hi:.2f})"
    if est.get("agreement") is not None:
        text += (f"; estimated agreement with judge-only {est['agreement']:.3f} "
                 f"(95% {est['ci95'][0]:.3f}-{est['ci95'][1]:.3f})")
    return text


def side_by_side(lines: Iterable[dict]) -> dict | None:
    """`eval`'s view of a cascade file: its summary, and where both the student and the judge answered
    (and the line has a 0/1 label), how often each agrees with the label and with the other; None for a
    file that is not a cascade's."""
    lines = [d for d in lines if d.get("decided_by")]
    if not lines:
        return None
    both = [d for d in lines if (d.get("student") or {}).get("status") == "ok"
            and (d.get("judge") or {}).get("status") == "ok" and d.get("label") in (0, 1)]

    def rate(k: int) -> dict:
        return {"agree": k, "n": len(both), "rate": k / len(both) if both else None, "ci95": wilson(k, len(both))}

    return {"summary": cascade_summary(lines), "both_answered": len(both),
            "student_vs_labels": rate(sum(d["student"]["score"] == d["label"] for d in both)),
            "judge_vs_labels": rate(sum(d["judge"]["score"] == d["label"] for d in both)),
            "student_vs_judge": rate(sum(d["student"]["score"] == d["judge"]["score"] for d in both))}


def markdown(side: dict) -> str:
    """The report.md section of a cascade file."""
    c = side["summary"]
    rows = [("student", side["student_vs_labels"]), ("judge", side["judge_vs_labels"]),
            ("student vs judge", side["student_vs_judge"])]
    text = ["", "## Student and judge", "", describe(c) + ".", "",
            f"Where both answered ({side['both_answered']} labelled trajectories):", "",
            "| | agree | rate | 95% interval |", "|---|---|---|---|"]
    for name, r in rows:
        ci = f"{r['ci95'][0]:.3f}-{r['ci95'][1]:.3f}" if r["ci95"] else "-"
        text.append(f"| {name}{' with the labels' if name != 'student vs judge' else ''} | {r['agree']}/{r['n']} | "
                    f"{r['rate']:.3f} | {ci} |" if r["rate"] is not None else f"| {name} | 0/0 | - | - |")
    return "\n".join(text) + "\n"
