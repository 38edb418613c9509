"""The verdict table: the one input of every figure of `eval`, `tts`, `calibrate` and `review` (the
review page's too). One row per verdict in numpy columns (status, score, label, platform code, the two
probabilities, costs; with `--votes k`, the `vote_*` counts), whatever the size of the file:

- `read` takes the verdict file's last line per id (verdict_file.iter_last_lines), joins the data set's
  labels, platforms and tasks on it by id as the data streams through labelled_stream.py's
  `LabelledStream` (the one place labels files are put on, or `loaded` when the caller holds the data),
  and lines the table up with the data (`align`: coverage.py's rules and messages);
- `of_verdicts` builds the same table from verdicts in memory.

A row's task is the data's task_id, or "instruction: " and the instruction when the record has none
(kept as its digest); without a data set, the verdicts' own labels, platforms and tasks.
Knows nothing about figures, plots, reports or argument parsing.
"""
from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..formats.base import OUTSIDE_ROOTS
from ..formats.ids import IdBuilder, IdSet, digest, key, keys
from ..formats.stream import as_stream
from ..labelled_stream import LabelledStream
from ..labels import AppliedLabels, read_labels
from ..verdict_file import iter_last_lines, iter_lines
from ..votes import counts
from .coverage import SUBSETS, Coverage, first

STATUSES = ("ok", "unparsed", "error", "missing")
OK, UNPARSED, ERROR, MISSING = range(len(STATUSES))
NO_TASK = 0  # the task code of a row without a task
Rows = dict[str, np.ndarray]  # column name -> one value a row
FIELDS = {"status": "b", "score": "b", "label": "b", "platform": "i", "p_success": "d",
          "p_calibrated": "d", "cost_tokens": "d", "cost_calls": "d", "verifier_tokens": "i", "images": "i",
          "hit_cap": "b", "hit_context": "b"}  # column -> array typecode
VOTE_COLUMNS = ("vote_ones", "vote_zeros", "vote_k")  # votes.py's `counts`: int16 each, once a line has votes


def task_of(t) -> str:
    """A trajectory's task: its task_id, else its instruction (the candidates `tts` groups)."""
    return t.task_id or f"instruction: {t.instruction}"


class VerdictTable:
    """The columns being built (`add`) and what they are coded against (platform names, task digests,
    models, bank hashes); with `candidates`, each row's task code and id bytes too (what `tts` reads)."""

    def __init__(self, candidates: bool = False):
        self.columns = {k: array(t) for k, t in FIELDS.items()}
        if candidates:
            self.columns.update(task=array("i"), name_at=array("q"), name_size=array("i"))
        self.names = bytearray() if candidates else None
        self.ids = IdBuilder()
        self.platforms: dict[str | None, int] = {}
        self.tasks: dict[bytes | None, int] = {None: NO_TASK}
        self.models: set = set()
        self.banks: set = set()
        self.sorted_keys: np.ndarray | None = None  # the rows' digests, sorted, each once
        self.rank: np.ndarray | None = None  # each row's place in sorted_keys

    def platform_code(self, platform: str | None) -> int:
        return self.platforms.setdefault(platform, len(self.platforms))

    def task_code(self, task: str | None) -> int:
        return self.tasks.setdefault(None if task is None else digest(task), len(self.tasks))

    def add(self, line: dict) -> None:
        """One verdict line (a dict as a verdict file holds it), with its own label, platform and task."""
        i = str(line["id"])
        self.ids.add(i)
        get = line.get
        p, calibrated = get("p_success"), get("p_success_calibrated")
        row = {"status": STATUSES.index(line["status"]) if line["status"] in STATUSES else UNPARSED,
               "score": get("score") if get("score") in (0, 1) else -1,
               "label": get("label") if get("label") in (0, 1) else -1, "platform": self.platform_code(get("platform")),
               "p_success": np.nan if p is None else float(p),
               "p_calibrated": np.nan if calibrated is None else float(calibrated),
               "cost_tokens": float(get("cost_tokens") or 0), "cost_calls": float(get("cost_calls") or 0),
               "verifier_tokens": int(get("prompt_tokens") or 0) + int(get("completion_tokens") or 0),
               "images": int(get("n_images") or 0), "hit_cap": bool(get("hit_cap")),
               "hit_context": bool(get("hit_context"))}
        if self.names is not None:
            row["task"] = self.task_code(None if get("task_id") is None else str(line["task_id"]))
            row["name_at"], row["name_size"] = self.put_name(i)
        for k, v in row.items():
            self.columns[k].append(v)
        self.models.add(get("model"))
        self.banks.add(get("bank_sha"))
        self.add_votes(i, get("votes") if line["status"] != "error" else None)

    def add_votes(self, i: str, votes) -> None:
        """The `vote_*` columns of the row just added (id `i`): its votes' `counts` (none: 0, 0, 0; an
        error line's votes are not read), the columns made (earlier rows: no votes) at the first votes."""
        c = self.columns
        if votes is None and "vote_k" not in c:
            return
        if votes is not None and (not isinstance(votes, list) or len(votes) > 32767
                                  or any(v not in (0, 1, None) for v in votes)):
            raise ValueError(f"the line of id {i!r}: 'votes' must be a list of 0, 1 or null, got {str(votes)[:80]}")
        if "vote_k" not in c:  # the earlier rows: no votes
            c.update({name: array("h", bytes(2 * (len(c["status"]) - 1))) for name in VOTE_COLUMNS})
        for name, x in zip(VOTE_COLUMNS, counts(votes or ())):
            c[name].append(x)

    def put_name(self, i: str) -> tuple[int, int]:
        """Keep an id's bytes; where they lie (`name_at`, `name_size`)."""
        raw = i.encode("utf-8", "surrogatepass")
        at = len(self.names)
        self.names += raw
        return at, len(raw)

    def name(self, rows: Rows, r: int) -> str:
        at, size = int(rows["name_at"][r]), int(rows["name_size"][r])
        return self.names[at:at + size].decode("utf-8", "surrogatepass")

    def frozen(self) -> Rows:
        """The columns as arrays that look into the buffers (no copy: nothing is added after this); the ids'
        digests kept sorted, with each row's place among them (`rank`), and the buffer of ids let go."""
        out = {k: np.frombuffer(v, dtype=v.typecode) if len(v) else np.zeros(0, dtype=v.typecode)
               for k, v in self.columns.items()}
        keys = self.ids.take()
        order = np.argsort(keys)
        self.sorted_keys = keys[order]
        del keys
        self.rank = np.empty(len(order), dtype=np.int32)
        self.rank[order] = np.arange(len(order), dtype=np.int32)
        return out

    def release(self) -> None:
        """Let the id digests go (the figures do not read them)."""
        self.sorted_keys = self.rank = None


def last_lines(path: Path) -> Iterator[dict]:
    """The verdict file's last line per id, in the order the ids first appear (verdict_file.iter_last_lines,
    the file left as it is); a line without an id or a status is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    for line in iter_last_lines(path, repair=False):
        if "status" not in line:
            raise ValueError(f"{path}: the line of id {line['id']!r} is not a verdict line (needs 'status')")
        yield line


def of_verdicts(verdicts: Iterable, candidates: bool = False) -> tuple[Rows, VerdictTable]:
    """The table of verdicts in memory (Verdict objects, with their own labels, platforms and tasks)."""
    table = VerdictTable(candidates)
    for v in verdicts:
        table.add(vars(v))  # read only: no deep copy of each verdict
    return table.frozen(), table


@dataclass
class DataSide:
    """What a data set says of a table's ids (`found`, `label`, `platform`, `task`: one entry for each of
    `have`, the table's sorted digests), of its trajectories without a verdict (`missing`) and of its
    records that did not load (`bad`: their ids; `outside`: the errors for screenshots outside its folder)."""

    have: np.ndarray
    found: np.ndarray
    label: np.ndarray
    platform: np.ndarray
    task: np.ndarray
    good: int = 0
    records: int = 0
    missing: list[tuple[str, int, int, int]] = field(default_factory=list)  # (id, label, platform, task)
    bad: list[str] = field(default_factory=list)
    outside: list = field(default_factory=list)


def read_data(stream, table: VerdictTable) -> DataSide:
    """The `DataSide` of a stream of trajectories (formats/stream.py: `items()`, `repeated(id)`,
    `records`) for `table`'s ids."""
    from ..scoring import error_id

    have = table.sorted_keys
    n, ids = len(have), IdSet(have, presorted=True)  # the table's ids, each once (no copy): `index` looks up
    tasks = table.names is not None  # what tts reads
    side = DataSide(have, np.zeros(n, bool), np.full(n, -1, "int8"), np.zeros(n, "int32"),
                    np.zeros(n if tasks else 0, "int32"))
    bad, good_repeated = [], set()
    for _, x in stream.items():
        if isinstance(x, Exception):
            bad.append(error_id(x))
            if OUTSIDE_ROOTS in str(x):
                side.outside.append(x)
            continue
        side.good += 1
        if stream.repeated(x.id):  # a later record with this id is an error: not an unread trajectory
            good_repeated.add(x.id)
        label = x.label if x.label in (0, 1) else -1
        platform, task = table.platform_code(x.platform), table.task_code(task_of(x)) if tasks else NO_TASK
        if (j := ids.index(x.id)) >= 0:
            side.found[j], side.label[j], side.platform[j] = True, label, platform
            if tasks:
                side.task[j] = task
        else:
            side.missing.append((x.id, label, platform, task))
    side.bad = [i for i in dict.fromkeys(map(str, bad)) if i not in good_repeated]
    side.records = stream.records
    return side


def _names(path: Path, wanted: np.ndarray) -> list[str]:
    """The ids (in file order) of the verdict lines whose digests are in `wanted`."""
    wanted = set(wanted.tolist())
    return list(dict.fromkeys(i for _, i, _ in iter_lines(path) if key(i) in wanted)) if wanted else []


def align(path: Path, rows: Rows, side: DataSide | None, table: VerdictTable, subset: str = "data",
          allow_extra: bool = False, data_name: str | None = None) -> tuple[Rows, Coverage]:
    """(the rows to evaluate, their Coverage) by coverage.py's rules: the data's labels, platforms and
    tasks on the rows it holds; stale error lines out; extra ids an error unless `allow_extra`; rows of
    records that did not load unlabelled; with `subset` "data", a `missing` row per trajectory without
    a verdict."""
    if subset not in SUBSETS:
        raise ValueError(f"subset must be one of {', '.join(SUBSETS)}, got {subset!r}")
    n = len(rows["status"])
    if side is None:
        return rows, Coverage(labels="verdicts", subset=subset, verdicts=n, covered=n, evaluated=n)
    at = table.rank  # each row's place among the sorted digests (side.have)
    in_data = side.found[at]
    in_bad = np.isin(side.have, keys(side.bad))[at] & ~in_data
    known = in_data | in_bad
    stale = ~known & (rows["status"] == ERROR)
    stale_names, extra = _names(path, side.have[at[stale]]), _names(path, side.have[at[~known & ~stale]])
    if extra and not allow_extra:
        raise ValueError(f"{path} holds verdicts for {len(extra)} id(s) that are not in {data_name or 'the data set'} "
                         f"(first: {first(extra)}): wrong DATA or --verdicts? Pass --allow-extra to leave them out and "
                         "evaluate the data set's trajectories")
    if not known.all():
        rows = {k: a[known] for k, a in rows.items()}
    from_data, at = in_data[known], at[known]
    rows["label"] = np.where(from_data, side.label[at], -1).astype("int8")
    for name in ("platform", "task") if "task" in rows else ("platform",):
        rows[name] = np.where(from_data, getattr(side, name)[at], rows[name]).astype("int32")
    m = len(side.missing)
    missing, labels, platforms, tasks = (list(c) for c in zip(*side.missing)) if m else ([], [], [], [])
    if subset == "data" and m:
        add = {k: np.zeros(m, dtype=a.dtype) for k, a in rows.items()}
        add.update(status=np.full(m, MISSING, "int8"), score=np.full(m, -1, "int8"),
                   label=np.array(labels, dtype="int8"), p_success=np.full(m, np.nan),
                   p_calibrated=np.full(m, np.nan), platform=np.array(platforms, dtype="int32"),
                   task=np.array(tasks, dtype="int32"))
        if table.names is not None:
            add["name_at"], add["name_size"] = (np.array(c) for c in zip(*map(table.put_name, missing)))
        rows = {k: np.concatenate([rows[k], add[k]]) for k in rows}
    return rows, Coverage(labels="data", subset=subset, trajectories=side.good + len(side.bad),
                          verdicts=n - int(stale.sum()), covered=int(known.sum()), missing=missing,
                          missing_labelled=sum(y in (0, 1) for y in labels), extra=extra, stale_errors=stale_names,
                          not_loaded=side.bad, not_loaded_verdicts=int(in_bad.sum()), evaluated=len(rows["status"]))


@dataclass
class Table:
    """A verdict file's table lined up with its data set: what every figure is computed from."""

    rows: Rows
    table: VerdictTable
    coverage: Coverage
    labels: AppliedLabels | None = None  # what the labels files did, None without any


def read(verdicts_path: str | Path, data=None, subset: str = "data", allow_extra: bool = False, fmt: str = "auto",
         image_roots=(), labels=(), loaded=None, candidates: bool = False,
         log: Callable[[str], None] | None = None) -> Table:
    """The verdict file's table over the data set `data` (streamed; `loaded`: the data set already
    loaded), the `labels` files put on the data's labels (read first: a bad line stops before the data
    is read). `log`: where the records that did not load and the labels' summary are said."""
    if labels and data is None:
        raise ValueError("--labels needs DATA: a labels file labels the trajectories of a data set")
    files = [read_labels(p) for p in labels]
    path, table = Path(verdicts_path), VerdictTable(candidates)
    for line in last_lines(path):  # the last line per id, in the order the ids first appear
        try:
            table.add(line)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
    rows = table.frozen()
    if data is None and loaded is None:
        rows, cov = align(path, rows, None, table, subset, allow_extra)
        return Table(rows, table, cov)
    stream = LabelledStream(data, files, fmt, image_roots=image_roots,
                            stream=as_stream(loaded) if loaded is not None else None)
    side = read_data(stream, table)
    applied = stream.applied() if files else None
    for said in (stream.warning(), applied and applied.summary()):
        if said and log:
            log(said)
    if side.outside:  # most records did not load for want of an --image-root: stop (image_roots.py)
        from types import SimpleNamespace

        from .image_roots import outside_image_roots

        outside_image_roots(SimpleNamespace(errors=side.outside, trajectories=range(side.records - len(side.outside))),
                            data)
    rows, cov = align(path, rows, side, table, subset, allow_extra, str(data) if data else None)
    return Table(rows, table, cov, applied)
