"""What a cascade's verdict lines say about it: how many went to the judge and why, what the judge
cost against judge-only scoring, and, from the spot checks, the student's agreement with the judge on
this data (95% Wilson interval) and the cascade's estimated agreement with judge-only scoring.

The estimate: a line the judge decided agrees with judge-only scoring by construction; a line the
student decided agrees at the rate the student agreed with the judge on the spot checks that nothing
else sent (a random sample of exactly the lines the student would decide). Counts line dicts (a
verdict file's last line per id) one at a time as they come (`CascadeTally`); knows nothing about
engines, files or flags.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..audit.verdict import wilson


def agree(d: dict) -> bool | None:
    """Whether the student's verdict agrees with the judge's on a line the judge answered (an unparsed
    or error student verdict does not); None when the judge gave no verdict."""
    s, j = d.get("student") or {}, d.get("judge") or {}
    if j.get("status") != "ok":
        return None
    return s.get("status") == "ok" and s.get("score") == j.get("score")


def spot_agreement(d: dict, only: bool) -> bool | None:
    """The student's agreement on a spot-checked line (`only`: one nothing else sent); None otherwise."""
    why = d.get("escalated") or []
    if "spot_check" in why and (not only or why == ["spot_check"]):
        return agree(d)
    return None


@dataclass
class CascadeTally:
    """Running counts of a cascade's lines (`add` one line dict at a time), for `cascade_summary`: what
    the summary needs without holding the lines. Sums are taken in the order the lines come."""

    n: int = 0
    by_judge: int = 0
    sent: int = 0
    why: Counter = field(default_factory=Counter)
    failed_by: Counter = field(default_factory=Counter)
    calls: float = 0  # sums start at 0, as sum() does, so a file's figures read as they always have
    tokens: float = 0
    answered: int = 0
    answered_calls: float = 0
    answered_tokens: float = 0
    spot_all: list[int] = field(default_factory=lambda: [0, 0])  # [agree, n]
    spot_only: list[int] = field(default_factory=lambda: [0, 0])

    def add(self, d: dict) -> None:
        """Count one line (a line that is not a cascade's, without `decided_by`, is passed over)."""
        if not d.get("decided_by"):
            return
        self.n += 1
        self.by_judge += d["decided_by"] == "judge"
        escalated = d.get("escalated") or []
        self.why.update(escalated)
        if d.get("judge_error"):
            self.failed_by[d["judge_error"].split(":", 1)[0]] += 1
        self.sent += bool(escalated)
        j = d.get("judge") if escalated else None
        if j:
            calls, tokens = j.get("cost_calls") or 0.0, j.get("cost_tokens") or 0.0
            self.calls += calls
            self.tokens += tokens
            if j.get("status") == "ok":
                self.answered += 1
                self.answered_calls += calls
                self.answered_tokens += tokens
        for only, acc in ((False, self.spot_all), (True, self.spot_only)):
            a = spot_agreement(d, only)
            if a is not None:
                acc[0] += a
                acc[1] += 1

    def summary(self) -> dict:
        """The `cascade` section of a run summary."""
        n, (agreed, spots), answered = self.n, self.spot_all, self.answered
        out = {"trajectories": n, "decided_by": {"student": n - self.by_judge, "judge": self.by_judge},
               "sent_to_judge": self.sent, "judge_share": self.sent / n if n else None,
               "why": {r: self.why[r] for r in ("error", "unparsed", "evidence_insufficient", "band", "spot_check")
                       if self.why[r]},
               "judge_failed": sum(self.failed_by.values()), "judge_failed_by": dict(self.failed_by),
               "judge_calls": self.calls, "judge_tokens": self.tokens,
               "judge_only_calls_est": self.answered_calls / answered * n if answered else None,
               "judge_only_tokens_est": self.answered_tokens / answered * n if answered else None,
               "spot_checks": {"n": spots, "agree": agreed, "student_agreement": agreed / spots if spots else None,
                               "ci95": wilson(agreed, spots)},
               "cascade_agreement_est": _estimate(n, n - self.by_judge, *self.spot_only)}
        if n and self.why["band"] > n / 2:
            k = self.why["band"]
            out["note"] = (f"the band sent {k} of {n} trajectories ({k / n:.0%}) to the judge: it does not fit this "
                           "student's p_success (a cascade that sends most saves little). Fit one: score a held-out "
                           "set with --spot-check 1, then `adaptrubric cascade-fit VERDICTS --out band.json`, and "
                           "score with --cascade-band band.json")
        return out


def cascade_summary(lines: Iterable[dict]) -> dict:
    """The `cascade` section of a run summary, from its verdict lines (an iterable, taken one line at a
    time: a generator over a file's last line per id holds one line)."""
    tally = CascadeTally()
    for d in lines:
        tally.add(d)
    return tally.summary()


def estimate(n: int, n_student: int, sample: list[bool]) -> dict | None:
    """The cascade's estimated agreement with judge-only scoring and its 95% interval: the `n_student`
    lines the student decided agree at the sample's rate, the others by construction."""
    return _estimate(n, n_student, sum(sample), len(sample))


def _estimate(n: int, n_student: int, agreed: int, size: int) -> dict | None:
    if not n:
        return None
    if not size:
        return {"agreement": None, "ci95": None, "n_sample": 0,
                "note": "no spot check fell on a line the student decided: raise --spot-check"}
    r = agreed / size
    lo, hi = wilson(agreed, size)
    judge = n - n_student
    return {"agreement": (judge + n_student * r) / n, "ci95": [(judge + n_student * lo) / n,
                                                                 (judge + n_student * hi) / n],
            "n_sample": size, "student_rate": r}


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
    if c.get("note"):
        text += f"\nnote: {c['note']}"
    return text


def side_by_side(lines: Iterable[dict]) -> dict | None:
    """`eval`'s view of a cascade file, from its lines alone (each says `decided_by`, `student` and
    `judge`; no summary sidecar needed): its summary, and where both the student and the judge answered
    (and the line has a 0/1 label), how often each agrees with the label and with the other; None for a
    file that is not a cascade's (told by its first line, so such a file is not read further)."""
    it = iter(lines)
    first = next(it, None)
    if first is None or not first.get("decided_by"):
        return None
    lines = [first, *(d for d in it if d.get("decided_by"))]
    both = [d for d in lines if (d.get("student") or {}).get("status") == "ok"
            and (d.get("judge") or {}).get("status") == "ok" and d.get("label") in (0, 1)]

    def rate(k: int) -> dict:
        return {"agree": k, "n": len(both), "rate": k / len(both) if both else None, "ci95": wilson(k, len(both))}

    return {"summary": cascade_summary(lines), "decided": decided(lines), "both_answered": len(both),
            "student_vs_labels": rate(sum(d["student"]["score"] == d["label"] for d in both)),
            "judge_vs_labels": rate(sum(d["judge"]["score"] == d["label"] for d in both)),
            "student_vs_judge": rate(sum(d["student"]["score"] == d["judge"]["score"] for d in both))}


def decided(lines: list[dict]) -> str:
    """Whose verdicts a cascade file's lines are, for a page header: the model that decided them (the
    judge's when the judge decided all), with how many each decided."""
    students = Counter((d.get("student") or {}).get("model") or (d.get("model") if d["decided_by"] == "student"
                                                                   else None) for d in lines)
    students.pop(None, None)
    student = students.most_common(1)[0][0] if students else "the student"
    judge = next((j["model"] for d in lines if (j := d.get("judge")) and j.get("model")), "the judge")
    n, k = len(lines), sum(d["decided_by"] == "judge" for d in lines)
    if k == n:
        return f"{judge} (the judge decided all {n}; student {student})"
    if k == 0:
        return f"{student} (the student decided all {n}; judge {judge})"
    return f"{student} with judge {judge} (the judge decided {k} of {n})"


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
