"""What a verdict file covers of the data set it is evaluated on, and the verdicts the metrics take.

The paper's figures have fixed denominators (k/77, k/188): every labelled trajectory of the data set
is classified. So, evaluated over a data set (`subset="data"`, the default):
- a trajectory of the data without a verdict (a run killed midway, another file) stays in the
  denominator as a `missing` verdict, a predicted failure like an unparsed one, counted and named;
- a verdict whose id is not in the data is an error (wrong DATA or --verdicts?), or with
  `allow_extra` left out with a warning; an error line for an id the data does not hold (a record
  that did not load then and was mended or removed since: its line is the file's, never rewritten)
  judged nothing and is left out with a note;
- `subset="verdicts"` evaluates only the trajectories the verdicts cover, and says so.
Label, platform and task_id come from the data (the source of truth; a step that changes the
data's labels runs before this one). A record of the data that did not load gives no label: its
verdict stays (an error line counts as an error) but unlabelled, so it is left out of every figure
and named, never evaluated with the label the verdict line was scored with. Without a data set the
labels the verdicts carry are used, and `Coverage` says that. Knows nothing about files, metrics or argument parsing.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace

from ..types import Trajectory, Verdict

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

    def lines(self, data: str | None = None, verdicts: str | None = None) -> list[str]:
        """The sentences of `messages`."""
        return [text for _, text in self.messages(data, verdicts)]


def first(ids: list[str], k: int = SHOWN_IDS) -> str:
    """The first `k` ids, comma-separated, with how many more there are."""
    shown = ", ".join(ids[:k])
    return shown + (f", ... ({len(ids) - k} more)" if len(ids) > k else "")


def missing_verdict(t: Trajectory) -> Verdict:
    """The stand-in for a trajectory the verdict file has no line for (never written to a verdict file)."""
    return Verdict(id=t.id, status=MISSING, label=t.label, platform=t.platform,
                   task_id=t.task_id or f"instruction: {t.instruction}",
                   error="no verdict for this trajectory in the verdict file")


def align(verdicts: list[Verdict], trajectories: list[Trajectory] | None, subset: str = "data",
          allow_extra: bool = False, unreadable: Iterable[str] = (), data: str | None = None,
          verdicts_name: str | None = None) -> tuple[list[Verdict], Coverage]:
    """(the verdicts to evaluate, how they cover the data). With `trajectories` None the verdicts are
    kept as they are. `unreadable`: ids of data records that could not be loaded (their verdicts belong
    to the data, unlabelled: `unlabelled`). Raises ValueError on verdicts for ids the data lacks, unless
    `allow_extra`."""
    if subset not in SUBSETS:
        raise ValueError(f"subset must be one of {', '.join(SUBSETS)}, got {subset!r}")
    if trajectories is None:
        return verdicts, Coverage(labels="verdicts", subset=subset, verdicts=len(verdicts), covered=len(verdicts),
                                  evaluated=len(verdicts))
    by_id = {t.id: t for t in trajectories}
    bad = list(dict.fromkeys(str(i) for i in unreadable if str(i) not in by_id))
    known = set(by_id) | set(bad)
    stale = [str(v.id) for v in verdicts if str(v.id) not in known and v.status == "error"]
    verdicts = [v for v in verdicts if str(v.id) in known or v.status != "error"]
    have = {str(v.id) for v in verdicts}
    extra = [str(v.id) for v in verdicts if str(v.id) not in known]
    if extra and not allow_extra:
        raise ValueError(f"{verdicts_name or 'the verdict file'} holds verdicts for {len(extra)} id(s) that are not in "
                         f"{data or 'the data set'} (first: {first(extra)}): wrong DATA or --verdicts? Pass "
                         "--allow-extra to leave them out and evaluate the data set's trajectories")
    kept = [label_from(v, by_id.get(str(v.id))) if str(v.id) in by_id else unlabelled(v)
            for v in verdicts if str(v.id) in known]
    missing = [t for t in trajectories if t.id not in have]
    if subset == "data":
        kept += [missing_verdict(t) for t in missing]
    cov = Coverage(labels="data", subset=subset, trajectories=len(known), verdicts=len(have),
                   covered=len(have & known), missing=[t.id for t in missing],
                   missing_labelled=sum(t.label in (0, 1) for t in missing), extra=extra, stale_errors=stale,
                   not_loaded=bad, not_loaded_verdicts=len(have & set(bad)), evaluated=len(kept))
    return kept, cov


def label_from(v: Verdict, t: Trajectory | None) -> Verdict:
    """The verdict with the trajectory's label, platform and task_id (a trajectory without a task_id is
    grouped with the others that share its instruction); unchanged without a trajectory."""
    if t is None:
        return v
    return replace(v, label=t.label, platform=t.platform, task_id=t.task_id or f"instruction: {t.instruction}")


def unlabelled(v: Verdict) -> Verdict:
    """The verdict of a data record that did not load: the data gives it no label, and the label its line
    was scored with is not used (it may be one a labels file has replaced since)."""
    return replace(v, label=None)

