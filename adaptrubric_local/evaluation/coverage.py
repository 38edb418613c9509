"""What a verdict file covers of the data set it is evaluated on, and the verdicts the metrics take.

The paper's figures have fixed denominators (k/77, k/188), so over a data set (`subset="data"`):
- a trajectory without a verdict stays in the denominator as a `missing` verdict (a predicted failure);
- a verdict whose id is not in the data is an error (wrong DATA or --verdicts?), or with `allow_extra`
  left out with a warning; an error line for an id the data does not hold (a record mended or removed
  since) judged nothing and is left out with a note;
- `subset="verdicts"` evaluates only the trajectories the verdicts cover, and says so.
Label, platform and task_id come from the data; a record that did not load gives no label, so its
verdict is left out of every figure and named. Without a data set the verdicts' own labels are used.
verdict_table.align applies the rules; this module says what they did. Knows nothing about files,
metrics or argument parsing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

SUBSETS = ("data", "verdicts")
SHOWN_IDS = 5  # ids named in a message
MISSING = "missing"  # the status of a trajectory the verdict file has no line for


@dataclass
class Coverage:
    """How a verdict file and a data set line up, and what was evaluated."""

    labels: str  # "data" (labels from the data set) or "verdicts" (no data set: the verdicts' own)
    subset: str = "data"  # "data": every trajectory of the data set; "verdicts": those with a verdict
    trajectories: int = 0  # in the data set (records that could not be read included)
    verdicts: int = 0  # distinct ids in the verdict file (stale error lines aside)
    covered: int = 0  # trajectories of the data set with a verdict
    missing: list[str] = field(default_factory=list)  # trajectories of the data set without one
    missing_labelled: int = 0  # of them, those with a label (what the headline counts)
    extra: list[str] = field(default_factory=list)  # verdict ids the data set does not hold
    stale_errors: list[str] = field(default_factory=list)  # error lines for ids the data set does not hold
    not_loaded: list[str] = field(default_factory=list)  # records of the data set that did not load (no label)
    not_loaded_verdicts: int = 0  # of them, those the verdict file has a line for (left out of the figures)
    evaluated: int = 0  # verdicts handed on (missing ones included)

    def to_dict(self) -> dict:
        return asdict(self)

    def messages(self, data: str | None = None, verdicts: str | None = None) -> list[tuple[bool, str]]:
        """(loud, sentence) pairs for the terminal and the report: what was evaluated, what is missing or
        extra; loud when trajectories of the data lack a verdict in the headline or verdicts were left out."""
        data, verdicts = data or "the data set", verdicts or "the verdict file"
        if self.labels == "verdicts":
            return [(False, f"no data set given: the labels, platforms and task ids are those in {verdicts}")]
        out = []
        if self.subset == "verdicts":
            out.append((False, f"--subset verdicts: evaluated on the {self.covered} trajectories {verdicts} covers, "
                               f"of {self.trajectories} in {data} ({len(self.missing)} without a verdict left out); "
                               "not the paper's fixed denominator"))
        elif self.missing:
            out.append((True, f"{len(self.missing)} of the {self.trajectories} trajectories in {data} have no verdict "
                              f"in {verdicts} (first: {first(self.missing)}): counted as missing, a predicted failure "
                              f"(SCORE 0) in the headline ({self.missing_labelled} of them labelled). Score them "
                              "(score --resume into the same file), or pass --subset verdicts to evaluate the "
                              f"{self.covered} covered only"))
        if self.not_loaded:
            out.append((bool(self.not_loaded_verdicts),
                        f"{len(self.not_loaded)} record(s) of {data} did not load (first: {first(self.not_loaded)}): "
                        f"the data gives them no label, so the {self.not_loaded_verdicts} verdict(s) {verdicts} holds "
                        "for them are left out of the figures (the labels stored in its lines are not used); mend the "
                        "records, or pass --image-root DIR where their screenshots lie in another folder"))
        if self.extra:
            out.append((True, f"{len(self.extra)} verdict id(s) in {verdicts} are not in {data} (first: "
                              f"{first(self.extra)}): left out (--allow-extra)"))
        if self.stale_errors:
            out.append((False, f"{len(self.stale_errors)} error line(s) in {verdicts} are for records that are not "
                               f"in {data} (first: {first(self.stale_errors)}; mended or removed since they were "
                               "scored): left out"))
        return out


def first(ids: list[str], k: int = SHOWN_IDS) -> str:
    """The first `k` ids, comma-separated, with how many more there are."""
    shown = ", ".join(ids[:k])
    return shown + (f", ... ({len(ids) - k} more)" if len(ids) > k else "")

