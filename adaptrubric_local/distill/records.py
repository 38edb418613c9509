"""The files of a distillation folder: one record per collected trajectory, the train/val split by
task, the manifest, and the reading back of all three.

A record keeps exactly what the verifier was shown (prompt, screenshots copied under `images/`,
suffix, chat messages) and what the teacher said: its answer text verbatim (`response`), what a
thinking teacher reasoned apart from its answer (`reasoning`: an endpoint's `reasoning_content`,
or an inline `<think>` block taken out of the answer), its parsed verdict and, when the teacher
gave one, its probability that SCORE is 1 (`p_success`). Knows nothing about engines or training.
"""
from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from pathlib import Path

from ..formats.ids import IdBuilder
from ..schema import json_lines
from ..thinking import split

FILES = {"collected": "collected.jsonl", "rejected": "rejected.jsonl", "failures": "failures.jsonl",
         "train": "train.jsonl", "val": "val.jsonl", "manifest": "manifest.json"}


def copy_images(paths: list[str], out: Path, tid: str, copy: bool) -> list[str]:
    """The screenshots a record keeps: copied under out/images/<id>/ (paths relative to `out`), or
    the original absolute paths when `copy` is off."""
    if not copy:
        return [str(Path(p).resolve()) for p in paths]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in tid)
    dst_dir = out / "images" / safe
    dst_dir.mkdir(parents=True, exist_ok=True)
    rel = []
    for k, p in enumerate(paths):
        dst = dst_dir / f"{k:02d}_{Path(p).name}"
        if not dst.exists():
            shutil.copy2(p, dst)
        rel.append(str(dst.relative_to(out)))
    return rel


def verify_record(prompt: str, images: list[str], suffix: str, messages: list[dict], text: str,
                  reasoning: str | None, verdict, hit_cap: bool) -> dict:
    """The `verify` part of a record: what the verifier saw and what the teacher answered."""
    return {"prompt": prompt, "images": images, "suffix": suffix, "messages": messages, "response": text,
            "reasoning": reasoning or split(text).thinking, "p_success": verdict.p_success, "hit_cap": hit_cap,
            "verdict": {"score": verdict.score, "evidence_sufficient": verdict.evidence_sufficient,
                        "missing_evidence": verdict.missing_evidence}}


def append(path: Path, obj: dict) -> None:
    """Append one JSON line (written and flushed at once, so a killed run keeps it)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(obj, ensure_ascii=False) + "\n")


def folder_file(data_dir: str | Path, name: str) -> Path:
    """The file `name` of a distillation folder; an error when it is not there."""
    path = Path(data_dir) / name
    if not path.is_file():
        raise ValueError(f"{path} not found (is {data_dir} a folder written by `adaptrubric distill collect`?)")
    return path


def read_split(data_dir: str | Path, split: str) -> list[dict]:
    """The records of one split; a malformed line is an error naming file and line."""
    path = folder_file(data_dir, f"{split}.jsonl")
    return [obj for _, obj in json_lines(path.read_text(encoding="utf-8").splitlines(), path)]


def split_tasks(tasks: list[str], val_fraction: float, seed: int) -> set[str]:
    """The held-out tasks: a seeded shuffle of all tasks of the data set, the first
    round(n * val_fraction) of them (at least one when the fraction is > 0 and n > 1)."""
    order = sorted(tasks)
    random.Random(seed).shuffle(order)
    n_val = round(len(order) * val_fraction)
    if val_fraction > 0 and len(order) > 1:
        n_val = min(max(1, n_val), len(order) - 1)
    return set(order[:n_val])


def split_warnings(counts: dict, val_fraction: float, seed: int) -> list[str]:
    """What is wrong with a train/val split for training (one class only, nothing held out)."""
    out = []
    for name, flag in (("validation", "val"), ("training", "train")):
        n, pos = counts[flag], counts[f"{flag}_positive"]
        if n and pos in (0, n):
            cls = "successes (SCORE 1)" if pos else "failures (SCORE 0)"
            why = ("the best epoch is chosen by agreement on it, which a student answering one class for everything "
                   "gets right" if flag == "val" else "the student cannot learn to tell the classes apart")
            out.append(f"all {n} {name} example(s) are {cls}: {why}; collect more tasks, or split them otherwise "
                       f"(--val-fraction {val_fraction}, --seed {seed}: the split is by task)")
    if not counts["val"] and val_fraction > 0 and counts["collected"]:
        out.append(f"no validation examples ({counts['tasks']} task(s), --val-fraction {val_fraction}): the last epoch "
                   "is kept, unchecked; collect more tasks or raise --val-fraction")
    return out


def iter_jsonl(path: Path):
    """Each line of a JSONL file written by this package, parsed one at a time; nothing when there is no file."""
    if Path(path).is_file():
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)


def _balanced(per_score: dict, seed: int) -> dict | None:
    """Which train records of each score balancing keeps (score -> kept positions among that score's
    records, in file order), drawn as a sample of each score's records would be (`random.sample` picks
    by position only: the same seed, the same records); None when there is a single class."""
    if len(per_score) != 2:
        return None
    k = min(per_score.values())
    rng = random.Random(seed)
    return {score: set(rng.sample(range(n), k)) for score, n in per_score.items()}


def finalize(out: Path, all_tasks: list[str], val_fraction: float, seed: int, balance: bool, meta: dict) -> dict:
    """Write train.jsonl / val.jsonl (split by task) and manifest.json from collected.jsonl, read twice
    line by line (counts, then the split written record by record), so memory does not grow with it."""
    path = out / FILES["collected"]
    val_tasks = split_tasks(all_tasks, val_fraction, seed)
    counts = dict.fromkeys(("collected", "train", "val", "balanced_out", "train_positive", "val_positive",
                            "with_p_success", "with_reasoning"), 0)
    per_score: Counter = Counter()
    ids = IdBuilder()
    for r in iter_jsonl(path):
        ids.add(str(r["id"]))
        counts["collected"] += 1
        counts["with_p_success"] += r["verify"].get("p_success") is not None
        counts["with_reasoning"] += bool(r["verify"].get("reasoning"))
        if r["task_id"] not in val_tasks:
            per_score[r["verify"]["verdict"]["score"]] += 1
    keep = _balanced(per_score, seed) if balance else None
    place: dict = {}
    with open(out / FILES["train"], "w", encoding="utf-8") as train, open(out / FILES["val"], "w",
                                                                          encoding="utf-8") as val:
        for r in iter_jsonl(path):
            score = r["verify"]["verdict"]["score"]
            name = "val" if r["task_id"] in val_tasks else "train"
            if name == "train":
                place[score] = k = place.get(score, -1) + 1
                if keep is not None and k not in keep[score]:
                    continue
            (val if name == "val" else train).write(json.dumps(r, ensure_ascii=False) + "\n")
            counts[name] += 1
            counts[f"{name}_positive"] += score == 1
    if keep is not None:
        counts["balanced_out"] = sum(per_score.values()) - counts["train"]
    collected = ids.freeze()
    reasons = {str(r["id"]): r["reason"] for r in iter_jsonl(out / FILES["rejected"])}  # the last per id
    rejected = [why for i, why in reasons.items() if i not in collected]
    counts.update(unparsed=sum(why == "unparsed" for why in rejected),
                  truncated=sum(why in ("truncated", "context") for why in rejected),
                  disagree=sum(why == "disagrees with label" for why in rejected),
                  failed=sum(1 for _ in iter_jsonl(out / FILES["failures"])), tasks=len(all_tasks),
                  val_tasks=len(val_tasks))
    manifest = {**meta, "counts": counts, "warnings": split_warnings(counts, val_fraction, seed)}
    (out / FILES["manifest"]).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest
