"""The audit's verdicts: the originals' accuracy against their labels, whether each clause of each
perturbation's expectation held (robust / not robust / too few to tell), and the one line a user acts
on. The rule is written once, in RULE (printed on every report; docs/audit.md tabulates it). Reads the
rows report.py measured; knows nothing about files or engines.
"""
from __future__ import annotations

import math

from .perturbations import CLAUSES, Perturbation

Z95 = 1.959964
NONE_BELOW = 0.20  # a "none" clause holds when no pair moved and the interval's upper bound is under this
MIN_PAIRS = 16  # the fewest pairs with 0 of n under NONE_BELOW (0/15: 0-20.4%, 0/16: 0-19.4%)
HOLDS, FAILS, TOO_FEW = "holds", "fails", "too few to tell"
ROBUST, NOT_ROBUST = "robust", "not robust"
RULE = ("Each clause of a perturbation's expectation is a share of pairs, k/n with its 95% Wilson interval: "
        "a 'none' clause (no verdict moves, none moves 0 -> 1) fails at its first flip and holds when none "
        f"moved over at least {MIN_PAIRS} pairs (the interval's upper bound under {100 * NONE_BELOW:.0f}%); "
        "a 'most' clause (most 1s become 0) holds when the interval lies above 50% and fails when it lies "
        "below; the accuracy holds when its interval lies above the share of the commoner label (answering it "
        f"every time) and fails when it lies below or when it is no higher over at least {MIN_PAIRS} originals; "
        "'more EVIDENCE_SUFFICIENT: no' holds when more "
        f"counterfactuals than originals say it and fails when no more do, over at least {MIN_PAIRS} pairs; "
        "anything else is too few to tell. A perturbation is not robust when a clause fails, robust when "
        "every clause holds, otherwise too few to tell.")


def wilson(k: int, n: int, z: float = Z95) -> list[float] | None:
    """The Wilson score interval [lo, hi] of k successes in n trials; None when n is 0."""
    if n <= 0:
        return None
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # exact at the ends: rounding would put 0/n's lower bound above 0 or n/n's upper bound below 1
    return [0.0 if k == 0 else max(0.0, mid - half), 1.0 if k == n else min(1.0, mid + half)]


def share(k: int, n: int) -> str:
    """'k/n (p%, 95% CI lo-hi%)', or 'k/0' when n is 0."""
    ci = wilson(k, n)
    return f"{k}/{n}" + (f" ({100 * k / n:.0f}%, 95% CI {100 * ci[0]:.0f}-{100 * ci[1]:.0f}%)" if ci else "")


def none_rule(k: int, n: int) -> str:
    """A 'none' clause: fails at a flip, holds when none moved and the interval is under NONE_BELOW."""
    if k > 0:
        return FAILS
    ci = wilson(k, n)
    return HOLDS if ci and ci[1] < NONE_BELOW else TOO_FEW


def most_rule(k: int, n: int) -> str:
    """A 'most' clause: holds when the interval lies above 50%, fails when it lies below."""
    ci = wilson(k, n)
    if ci is None:
        return TOO_FEW
    return HOLDS if ci[0] > 0.5 else FAILS if ci[1] < 0.5 else TOO_FEW


def check_clause(clause: str, row: dict) -> dict:
    """One clause of a measured row (report.row_of): what it says, its figures, its result and the short
    figure the bottom line quotes."""
    up, down = row["flips_0_1"], row["flips_1_0"]
    shares = {"no-move": (up["k"] + down["k"], up["n"] + down["n"], none_rule, "verdicts moved"),
              "no-0-to-1": (up["k"], up["n"], none_rule, "SCORE 0 -> 1"),
              "most-1-to-0": (down["k"], down["n"], most_rule, "SCORE 1 -> 0")}
    if clause in shares:
        k, n, rule, what = shares[clause]
        return {"clause": clause, "says": CLAUSES[clause], "k": k, "n": n, "result": rule(k, n),
                "figure": f"{k}/{n} {what}", "ci95": wilson(k, n), "shown": share(k, n)}
    if clause != "more-insufficient":
        raise ValueError(f"unknown clause {clause!r}; known: {', '.join(CLAUSES)}")
    b, a, n = row["insufficient"]["before"], row["insufficient"]["after"], row["compared"]
    result = TOO_FEW if n < MIN_PAIRS else HOLDS if a > b else FAILS  # decided over MIN_PAIRS pairs at least
    return {"clause": clause, "says": CLAUSES[clause], "before": b, "after": a, "n": n,
            "result": result, "figure": f"EVIDENCE_SUFFICIENT: no {b} -> {a} of {n}",
            "shown": f"{b} -> {a} over {n} pairs"}


def judge(p: Perturbation, row: dict) -> tuple[str, list[dict]]:
    """(robust / not robust / too few to tell, every clause of `p`'s expectation checked)."""
    checks = [check_clause(c, row) for c in p.clauses]
    results = {c["result"] for c in checks}
    return (NOT_ROBUST if FAILS in results else ROBUST if results == {HOLDS} else TOO_FEW), checks


def accuracy_of(k: int, n: int, ones: int, unlabelled: int, unparsed: int, errors: int, unscored: int) -> dict:
    """The originals' agreement with their labels: k of the n labelled originals with a parsed verdict
    agree, `ones` of those n are labelled 1, judged against answering their commoner label every time
    (its share `base`): holds when the interval lies above it; fails when it lies below, or when k/n is
    no higher over at least MIN_PAIRS originals. The unparsed, errors, unscored and unlabelled ones are
    counted apart."""
    common = int(ones > n - ones)
    base = max(ones, n - ones) / n if n else None
    ci = wilson(k, n)
    result = (TOO_FEW if ci is None else HOLDS if ci[0] > base
              else FAILS if ci[1] < base or (k / n <= base and n >= MIN_PAIRS) else TOO_FEW)
    return {"k": k, "n": n, "rate": k / n if n else None, "ci95": ci,
            "result": result, "baseline": {"label": common, "rate": base},
            "shown": share(k, n), "unlabelled": unlabelled, "unparsed": unparsed, "errors": errors,
            "unscored": unscored}


def accuracy_text(acc: dict) -> str:
    """'agree with their labels: k/n (p%, 95% CI) of the labelled originals with a parsed verdict (...)'."""
    left = [f"{acc[k]} {k}" for k in ("unparsed", "errors", "unscored", "unlabelled") if acc[k]]
    base = acc["baseline"]
    than = f"; answering {base['label']} every time: {100 * base['rate']:.0f}%" if acc["n"] else ""
    return (f"originals agree with their labels: {acc['shown']} of those labelled with a parsed verdict"
            + (f" ({', '.join(left)} not counted)" if left else "") + f"{than}: {acc['result']}")


def bottom_line(acc: dict, rows: dict[str, dict]) -> str:
    """The one line a user acts on (the module docstring's order)."""
    if not acc["n"]:
        return ("cannot tell yet: no labelled original has a parsed verdict "
                f"({acc['unparsed']} unparsed, {acc['errors']} errors, {acc['unlabelled']} unlabelled): every rate "
                "is over nothing; make its verdicts parse (review.html shows their raw text) or label the data first")
    unparsed = acc["unparsed"] + acc["errors"]
    note = f"; {unparsed} of {acc['n'] + unparsed} labelled originals got no parsed verdict" if unparsed else ""
    base = acc["baseline"]
    failed = [f"agrees with the labels on {acc['shown']}, no better than answering {base['label']} every time "
              f"({100 * base['rate']:.0f}%)"] if acc["result"] == FAILS else []
    for name, r in rows.items():
        failed += [f"{name}: {c['figure']} (expected: {c['says']})" for c in r["clauses"] if c["result"] == FAILS]
    few = [f"{name} ({', '.join(c['figure'] for c in r['clauses'] if c['result'] == TOO_FEW)})"
           for name, r in rows.items() if r["verdict"] == TOO_FEW]
    if acc["result"] == TOO_FEW:
        few.insert(0, f"accuracy ({acc['k']}/{acc['n']} agree with the labels)")
    if failed:
        rest = f"; too few to tell: {', '.join(few)}" if few else ""
        return "not fit as an RL reward yet: " + "; ".join(failed) + rest + note
    if few:
        return (f"too few to tell yet: {', '.join(few)}; nothing failed so far: audit more trajectories (a 'none' "
                f"clause needs {MIN_PAIRS} pairs without a flip) before trusting it as a reward" + note)
    return (f"robust to all {len(rows)} perturbations audited, agreeing with the labels on {acc['shown']}: fit to "
            "try as an RL reward as far as these checks tell" + note)


def verdicts_of(acc: dict, rows: dict[str, dict]) -> dict:
    """The top of the audit: accuracy, each perturbation's verdict, the bottom line and the rule."""
    return {"bottom_line": bottom_line(acc, rows), "accuracy": acc,
            "perturbations": {name: r["verdict"] for name, r in rows.items()}, "rule": RULE}
