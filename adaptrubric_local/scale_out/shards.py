"""Merging the verdict files of `score --shard I/N` (N machines or GPUs, each scoring every N-th record
into its own file) into one, after checking that the shards cover the data once: every shard 1..N is
there once, all were scored with the same settings, no id is in two shards, and (given the data) every
record of the data has its verdict. Lines are interleaved shard by shard (the data's order when each
shard is in order), the config sidecar is the shards' less `shard`, and the summary comes from the
shards' running counts (verdict_file.Tally), as one run's would.

Knows nothing about scorers or engines; reads verdict files and, to check coverage, the data's ids.
"""
from __future__ import annotations

import json
from collections import defaultdict
from contextlib import ExitStack
from itertools import zip_longest
from pathlib import Path

import numpy as np

from ..formats.ids import IdSet
from ..formats.stream import Shard, stream_trajectories
from ..run_settings import data_fingerprint, settings_diff, sidecar
from ..verdict_file import FileState, Tally, iter_lines


class ShardError(ValueError):
    """The shards do not cover the data once (names the shard files and what is wrong)."""


def _config(path: Path) -> dict:
    cfg = sidecar(path, "config")
    if not cfg.is_file():
        raise ShardError(f"{path}: no {cfg.name} beside it; merge takes the files `score --shard I/N` wrote")
    meta = json.loads(cfg.read_text())
    if "shard" not in meta:
        raise ShardError(f"{path}: not a shard ({cfg.name} records no --shard I/N)")
    return meta


def check_shards(paths: list[Path]) -> tuple[list[Path], dict]:
    """The shard files in shard order and their common config (less `shard`); ShardError otherwise."""
    metas = [(p, _config(p)) for p in paths]
    shards = [(p, Shard.parse(m["shard"])) for p, m in metas]
    counts = sorted({s.count for _, s in shards})
    if len(counts) > 1:
        raise ShardError(f"the shards were cut into different numbers of parts ({', '.join(map(str, counts))}): "
                         + ", ".join(f"{p} is {s}" for p, s in shards))
    n = counts[0]
    by_index: dict[int, list[Path]] = defaultdict(list)
    for p, s in shards:
        by_index[s.index].append(p)
    if twice := {i: ps for i, ps in by_index.items() if len(ps) > 1}:
        raise ShardError("; ".join(f"shard {i}/{n} given twice: {', '.join(map(str, ps))}" for i, ps in twice.items()))
    if missing := [f"{i}/{n}" for i in range(1, n + 1) if i not in by_index]:
        raise ShardError(f"shard(s) {', '.join(missing)} missing: the {len(paths)} file(s) given cover "
                         f"{', '.join(str(s) for _, s in shards)} of {n}")
    ordered = [by_index[i][0] for i in range(1, n + 1)]
    meta = dict(metas)
    base = {k: v for k, v in meta[ordered[0]].items() if k != "shard"}
    for p in ordered[1:]:
        if diff := settings_diff(base, {k: v for k, v in meta[p].items() if k != "shard"}):
            raise ShardError(f"{p} was scored with other settings than {ordered[0]}: {'; '.join(diff)}")
    return ordered, base


def check_data(ordered: list[Path], data: str | Path) -> None:
    """ShardError naming the shard and the data when a shard was scored on other data than `data`: its
    recorded fingerprint differs (the same data elsewhere, under another path, matches), or, for a shard
    that records none, its recorded path is another."""
    fp = data_fingerprint(data)
    for p in ordered:
        meta = json.loads(sidecar(p, "config").read_text())
        was, was_fp = meta.get("data"), meta.get("data_fingerprint")
        if was_fp is not None and was_fp != fp:
            raise ShardError(f"{p} was scored on {was}, whose content differs from {data} (data_fingerprint "
                             f"{was_fp} in {sidecar(p, 'config').name}, {fp} for {data}): merge the shards of one "
                             "data set against that data set")
        if was_fp is None and was is not None and Path(was).resolve() != Path(data).resolve():
            raise ShardError(f"{p} was scored on {was}, not on {data} (its {sidecar(p, 'config').name} records no "
                             "data_fingerprint to show they are the same data): merge it against the data it scored")


def check_known_ids(ordered: list[Path], states: list[FileState], known: IdSet, data: str | Path) -> None:
    """ShardError naming the shard, a few ids and the data when a shard holds ids `data` has none of."""
    for p, s in zip(ordered, states):
        own = s.ids.without(s.errors)  # a bad record's line is named by its place when it has no id
        if strangers := int((~known.has_keys(own)).sum()):
            some = [i for _, i, d in iter_lines(p) if i not in known and d.get("status") != "error"][:3]
            raise ShardError(f"{p} holds {strangers} id(s) that {data} does not have (e.g. {', '.join(some)}): "
                             "it was scored on other data, or the data has changed since")


def merge_shards(paths: list[str | Path], out: str | Path, data: str | Path | None = None, fmt: str = "auto",
                 image_roots=()) -> dict:
    """Check the shards (`check_shards`, then their ids: none in two shards, and with `data` every
    record answered) and write them as one verdict file `out` with its sidecars; returns its summary."""
    ordered, base = check_shards([Path(p) for p in paths])
    out = Path(out)
    if out.exists() and out.stat().st_size:
        raise ShardError(f"{out} exists; choose another output for the merge")
    states = [FileState.scan(p) for p in ordered]
    union = IdSet(np.concatenate([s.ids.keys for s in states])) if states else IdSet.of(())
    if union.repeated_count():
        both = [(i, [str(p) for p, s in zip(ordered, states) if i in s.ids])
                for p in ordered for _, i, _ in iter_lines(p) if union.is_repeated(i)][:3]
        raise ShardError(f"{union.repeated_count()} id(s) are in more than one shard, e.g. "
                         + "; ".join(f"{i!r} in {' and '.join(ps)}" for i, ps in both))
    if data is not None:
        check_data(ordered, data)
        stream = stream_trajectories(data, fmt=fmt, check_images=False, image_roots=image_roots)
        check_known_ids(ordered, states, stream.ids, data)
        lacking = int((~np.isin(stream.ids.keys, union.keys)).sum())
        if lacking or len(union) < stream.records:
            raise ShardError(f"the shards hold {len(union)} id(s) for the {stream.records} record(s) of {data}; "
                             f"{lacking} id(s) of the data have no verdict in any shard: finish the shards "
                             "(`score --shard I/N --resume`) before merging")
    whole = Tally()
    for s in states:
        whole.merge(s.tally)
    out.parent.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack, open(out, "w", encoding="utf-8") as fh:
        files = [stack.enter_context(open(p, encoding="utf-8")) for p in ordered]
        for lines in zip_longest(*files):  # one line of each shard in turn: record k of the data came from shard k % N
            fh.writelines(line if line.endswith("\n") else line + "\n" for line in lines if line is not None)
    prev = [json.loads(sidecar(p, "summary").read_text()) for p in ordered if sidecar(p, "summary").is_file()]
    seconds = sum(s.get("seconds", 0.0) for s in prev)
    summary = whole.summary({k: sum(s.get(f"{k}_unparsed", 0) for s in prev) for k in ("route", "cue")}, seconds)
    timed = sum(s.get("timed_trajectories", 0) for s in prev)
    summary.update(s_per_traj=seconds / max(1, timed), timed_trajectories=timed, out=str(out),
                   model=base.get("model"), bank_sha=base.get("bank_sha"), ablation=base.get("ablation"),
                   merged={"shards": [str(p) for p in ordered], "of": len(ordered),
                           "checked_against": str(data) if data is not None else None})
    sidecar(out, "config").write_text(json.dumps({**base, "merged_from": [str(p) for p in ordered]}, indent=2) + "\n")
    sidecar(out, "summary").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
