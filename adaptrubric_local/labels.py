"""Labels files: a person's success/failure judgments of trajectories, and the rules that put them on
a data set's labels.

A labels file is JSONL, one line per labelled trajectory, as the review page exports it:

    {"id": "t1", "label": 1, "note": "toggle is on", "score": 0, "p_success": 0.31,
     "time": "2026-05-01T09:12:03.120Z", "data": "runs/synth/trajectories.jsonl", "verdicts": "v.jsonl"}

`id` and `label` are required; `label` is 1 (success), 0 (failure) or null (unsure: no label); `score`
and `p_success` are the verdict's when the label was set; the rest say when and on which page. Lines
are read into a strict schema: an unknown key, a wrong type, a malformed line or an empty file is an
error naming the file, the line and the field. A line keyed by `trace_id` is a line of AndroidGen's own
`labels.jsonl` (`androidgen_line`), and an AndroidGen judge's `database.json` is read as labels too
(`androidgen_database`). A later line for an id wins, as in verdict files.

Files in order, a later file wins per id (`merged_labels`); a 0/1 label overrides or fills the data's
label, an unsure line leaves it as it was; an id that is not in the data is an error naming it
(`check_ids`); what was done is counted (`AppliedLabels`, with each file's sha256). They are put on
trajectories by labelled_stream.py only. `reviewed` reads back the lines of the files such a record
names: what a person decided, which the labelling orders put last and the review page shows.
Knows nothing about formats, verdicts or commands.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError, ValidationInfo, field_validator

from .schema import Strict, json_lines

FIELDS = ("id", "label", "note", "score", "p_success", "time", "data", "verdicts")


class LabelsError(ValueError):
    """A labels file that cannot be used; the message names the file, the line and the field."""


class LabelRecord(Strict):
    """One line of a labels file."""

    id: str
    label: Literal[0, 1] | None
    note: str | None = None
    score: Literal[0, 1] | None = None
    p_success: float | None = None
    time: str | None = None
    data: str | None = None
    verdicts: str | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _check(cls, v: Any, info: ValidationInfo) -> Any:
        name = info.field_name
        if name == "id":
            if isinstance(v, bool) or not isinstance(v, (str, int)) or not str(v).strip():
                raise ValueError("must be a non-empty string (or an integer)")
            return str(v)
        if v is None:
            return v
        if name in ("label", "score") and (isinstance(v, bool) or v not in (0, 1) or not isinstance(v, int)):
            raise ValueError(f"must be 0, 1 or null, got {json.dumps(v)}")
        if name == "p_success":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ValueError(f"must be a number from 0 to 1 or null, got {json.dumps(v)}")
            return float(v)
        if name in ("note", "time", "data", "verdicts") and not isinstance(v, str):
            raise ValueError(f"must be a string or null, got {type(v).__name__}")
        return v


@dataclass
class LabelsFile:
    """A labels file as read: its lines by id (the last line per id wins) and where each came from."""

    path: Path
    sha256: str
    records: dict[str, LabelRecord]
    lines: dict[str, int]  # id -> the line number its record came from
    n_lines: int

    @property
    def provenance(self) -> dict:
        """What a run record keeps of this file."""
        decided = sum(r.label is not None for r in self.records.values())
        return {"path": str(self.path), "sha256": self.sha256, "lines": self.n_lines, "ids": len(self.records),
                "labels": decided, "unsure": len(self.records) - decided}


def androidgen_line(obj: dict) -> dict | None:
    """A line of AndroidGen's own `labels.jsonl` (keyed by `trace_id`: what the AndroidGen loader reads
    beside the traces) as a labels line: its `trace_id` is the id and its `label` the label; the notes of
    its own (`confidence`, `why`, ...) are not read, as the loader does not read them. None for a line
    that has an `id` or no `trace_id` (a labels line, read as it is)."""
    if "id" in obj or "trace_id" not in obj:
        return None
    return {"id": obj["trace_id"], **({"label": obj["label"]} if "label" in obj else {})}


def androidgen_database(text: str) -> dict[str, int] | None:
    """An AndroidGen judge's `database.json` (one JSON object keyed by episode folder whose entries carry
    `complete`: THUDM/AndroidGen `model/judge/judge.py` L108-136) as id -> 0/1, or None when the text is
    not one. Its sub-goal entries (`<folder>-<k>`, with `step`) are not episodes and are left out."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not doc or not all(isinstance(v, dict) and "complete" in v for v in doc.values()):
        return None
    return {str(k): int(v["complete"]) for k, v in doc.items() if "step" not in v and isinstance(v["complete"], bool)}


def _problem(path: Path, n: int, exc: ValidationError, keyed_by: str = "id") -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(keyed_by if p == "id" else str(p) for p in err["loc"]) or "(line)"
        msg = {"extra_forbidden": f"unknown key (allowed: {', '.join(FIELDS)})", "missing": "required field missing"
               }.get(err["type"], err["msg"].removeprefix("Value error, "))
        parts.append(f"{path}: line {n}, field '{where}': {msg}")
    return "\n".join(parts)


def read_labels(path: str | Path) -> LabelsFile:
    """Read one labels file into the schema, or raise LabelsError naming the file and line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LabelsError(f"{path}: cannot read the labels file ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LabelsError(f"{path}: not UTF-8 text (byte {exc.start}); a labels file is JSONL") from None
    database = androidgen_database(text)
    records = {k: LabelRecord(id=k, label=v) for k, v in (database or {}).items()}
    lines, n_lines = dict.fromkeys(records, 1), len(records)
    for n, obj in json_lines(text.splitlines() if database is None else [], path, LabelsError):
        if not isinstance(obj, dict):
            raise LabelsError(f"{path}: line {n}: expected a JSON object with 'id' and 'label', got "
                              f"{type(obj).__name__}")
        if "steps" in obj or "status" in obj:
            kind = "trajectory data" if "steps" in obj else "a verdict file"
            raise LabelsError(f"{path}: line {n}: this looks like {kind}, not a labels file (lines of 'id' and "
                              "'label', as the review page's Export writes)")
        android = androidgen_line(obj)
        try:
            rec = LabelRecord.model_validate(obj if android is None else android)
        except ValidationError as exc:
            raise LabelsError(_problem(path, n, exc, "id" if android is None else "trace_id")) from None
        records.pop(rec.id, None)  # keep first-seen order of the last line per id
        records[rec.id] = rec
        lines[rec.id] = n
        n_lines += 1
    if not n_lines:
        raise LabelsError(f"{path}: no labels in the file (it is empty)")
    return LabelsFile(path, hashlib.sha256(raw).hexdigest(), records, lines, n_lines)


def write_labels(records: Iterable[LabelRecord | dict], path: str | Path) -> Path:
    """Write labels as JSONL (every field, in the schema's order); each record is validated."""
    path = Path(path)
    rows = [r if isinstance(r, LabelRecord) else LabelRecord.model_validate(r) for r in records]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r.model_dump(), ensure_ascii=False) + "\n" for r in rows)
    return path


@dataclass
class AppliedLabels:
    """What `apply_labels` did: per file provenance and counts over the data."""

    files: list[dict] = field(default_factory=list)
    filled: int = 0  # trajectories that had no label and got one
    overridden: int = 0  # trajectories whose label a file replaced with a different one
    confirmed: int = 0  # trajectories whose label a file repeated
    unsure: int = 0  # ids whose last word (over all files) is unsure: their labels were left as they were
    unsure_kept: dict = field(default_factory=dict)  # those ids by the label they keep: "1", "0", "none"
    not_loaded: list[str] = field(default_factory=list)  # ids of bad records (no trajectory to label)

    def count(self, before: int | None, label: int | None) -> None:
        """Count one trajectory whose label was `before` and whose labels files' last word is `label`."""
        if label is None:
            self.unsure += 1
            key = "none" if before is None else str(before)
            self.unsure_kept[key] = self.unsure_kept.get(key, 0) + 1
        elif before is None:
            self.filled += 1
        elif before != label:
            self.overridden += 1
        else:
            self.confirmed += 1

    def record(self) -> dict:
        """For run.json, metrics.json, a calibration file or a manifest."""
        return {**asdict(self), "not_loaded": len(self.not_loaded)}

    def unsure_text(self) -> str:
        """"2 unsure (keep the data's label 1)", "3 unsure (the data's labels kept: 2 of 1, 1 none)": what the
        trajectories a file calls unsure are labelled with now."""
        kept = {k: n for k, n in self.unsure_kept.items() if n}
        if not self.unsure or not kept:
            return f"{self.unsure} unsure"
        if len(kept) == 1:
            (key, n), = kept.items()
            said = "no label: the data has none" if key == "none" else \
                f"{'keeps' if n == 1 else 'keep'} the data's label {key}"
            return f"{n} unsure ({said})"
        parts = ", ".join(f"{kept[k]} {'none' if k == 'none' else f'of {k}'}" for k in ("1", "0", "none") if k in kept)
        return f"{self.unsure} unsure (the data's labels kept: {parts})"

    def summary(self) -> str:
        """One line for the terminal."""
        names = ", ".join(Path(f["path"]).name for f in self.files)
        text = (f"labels from {names}: {self.filled} filled, {self.overridden} overridden, {self.confirmed} the "
                f"same as the data's, {self.unsure_text()}")
        if self.not_loaded:
            text += f"; {len(self.not_loaded)} for records that did not load ({', '.join(self.not_loaded[:3])})"
        return text


def merged_records(files: list[LabelsFile]) -> dict[str, LabelRecord]:
    """id -> the line that has the last word over files in order: a later file's 0/1 wins; unsure never
    replaces a 0/1."""
    out: dict[str, LabelRecord] = {}
    for f in files:
        for i, r in f.records.items():
            if r.label is not None or i not in out:
                out[i] = r
    return out


def merged_labels(files: list[LabelsFile]) -> dict[str, int | None]:
    """id -> label over files in order (`merged_records`)."""
    return {i: r.label for i, r in merged_records(files).items()}


def reviewed(record: dict | None) -> dict[str, LabelRecord]:
    """The lines (label, note, time) of the labels files an `AppliedLabels.record()` names, merged as
    `apply_labels` merged them: what a person decided, as opposed to the labels that come with the data.
    A file that changed since it was applied is a LabelsError."""
    files = []
    for f in (record or {}).get("files", []):
        got = read_labels(f["path"])
        if got.sha256 != f["sha256"]:
            raise LabelsError(f"{f['path']}: changed while the command ran (sha256 {f['sha256'][:12]}... when "
                              f"applied, {got.sha256[:12]}... now); run it again")
        files.append(got)
    return merged_records(files)


def not_loaded_warning(errors: int, records: int, first_error, data) -> str:
    """The line a command that reads labels prints when records of its data did not load."""
    return (f"warning: {errors} of {records} record(s) of {data} did not load, so the data gives them no label; "
            f"the first: {first_error}")


def check_ids(files: list[LabelsFile], in_data, data_name: str = "the data") -> None:
    """Raise LabelsError naming the file, line and id of the first id of `files` (in order) that
    `in_data(id)` says the data does not hold (a record that did not load holds its id), and how many more."""
    for f in files:
        unknown = [i for i in f.records if not in_data(i)]
        if unknown:
            more = f" (and {len(unknown) - 1} more: {', '.join(unknown[1:4])}{', ...' if len(unknown) > 4 else ''})" \
                if len(unknown) > 1 else ""
            raise LabelsError(f"{f.path}: line {f.lines[unknown[0]]}: id {unknown[0]!r} is not in {data_name}{more}; "
                              "a labels file labels trajectories of the data set it is used with")


@dataclass
class LabelsConfig:
    """The labels files a command reads (its --labels flags)."""

    labels: list[str] = field(default_factory=list, metadata={"common": "data",
        "metavar": "LABELS.jsonl",
        "help": "a labels file (what the review page's Export writes: id, label 1/0/null per line) whose labels "
                "override or fill the data's; a later file wins per id; null (unsure) is no label"})
