"""Collect a teacher's AdaptRubric judgments into a distillation folder (files: `records.py`).

The teacher runs the full pipeline (route, cues, fused prompt, selected screenshots) through an
engine that records every request and reply. Lines are appended to `collected.jsonl` as they
complete, so nothing is lost when a run dies; `--resume` skips what is there. Unparsed teacher
outputs (and, with `agree_with_labels`, disagreeing ones) go to `rejected.jsonl` with the reason,
never into training data. A reply cut by the teacher's token cap (`finish_reason: length`, often a
thinking teacher that used the whole budget to reason) is rejected as `truncated` with the cap,
whether or not a verdict block parses in it (one drafted in the reasoning is not the answer):
`--resume` retries it only once the cap is raised. Failed calls go to `failures.jsonl` and are
retried by the next `--resume`. The data is read as a stream (formats/stream.py), the records parsed as
the teacher asks for them; a resume reads the ids of `collected.jsonl` only. `finalize` splits by task into
`train.jsonl`/`val.jsonl` and writes `manifest.json`. Knows nothing about argument parsing or training.
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np

from .._version import __version__
from ..bank import load_bank
from ..engine.base import Engine, Output, Request
from ..engine.fake import ScriptedEngine
from ..engine.openai_engine import chat_messages
from ..formats.base import DataError, leading_id
from ..formats.ids import IdBuilder, IdSet
from ..formats.ids import key as id_key
from ..formats.stream import as_stream, stream_trajectories
from ..pipeline import AdaptRubric, PipelineConfig
from ..prompts import load_prompts
from ..route import router_prompt
from ..stages.cues import cue_prompt
from ..types import Trajectory, Verdict
from ..verdict_file import repair_torn_tail
from .records import FILES, append, copy_images, finalize, iter_jsonl, verify_record


@dataclass
class CollectConfig:
    """How to collect; saved in the manifest."""

    val_fraction: float = field(default=0.2, metadata={"help": "fraction of tasks held out for val"})
    agree_with_labels: bool = field(default=False, metadata={"help": "keep only verdicts that match the label"})
    balance: bool = field(default=False, metadata={"help": "downsample the majority class in train"})
    seed: int = field(default=0, metadata={"help": "seed of the task split and balancing"})
    copy_images: bool = field(default=True, metadata={"help": "copy the selected screenshots into DIR/images"})

    def __post_init__(self):
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")


class RecordingEngine(Engine):
    """Forwards to a teacher engine and keeps every request with its output."""

    def __init__(self, inner: Engine):
        self.inner = inner
        self.name = inner.name
        self.verify: dict[str, tuple[Request, Output]] = {}
        self.by_prompt: dict[str, Output] = {}  # route and cue calls, by prompt text

    def generate(self, requests: list[Request]) -> list[Output]:
        outs = self.inner.generate(requests)
        for r, o in zip(requests, outs):
            if r.kind == "verify":
                self.verify[str(r.tag)] = (r, o)
            else:
                self.by_prompt[r.prompt] = o
        return outs

    def close(self) -> None:
        self.inner.close()


def label_block(label: int) -> str:
    """A data label written as the verifier's output block."""
    return f"SCORE: {int(label)}\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"


def label_teacher(trajs: Iterable[Trajectory], sure: float | None = None) -> ScriptedEngine:
    """A teacher that answers every verifier request with the trajectory's own label (`trajs` may be a
    stream's: the labels are kept as one byte per id digest, not as the trajectories). With `sure`, it is
    that sure of each answer: P(SCORE=1) = sure for a label 1, 1 - sure for a label 0 (recorded as a
    vLLM judge's SCORE-digit logprobs would be)."""
    labels = Labels(trajs)
    return ScriptedEngine(script=lambda req: label_block(labels.get(req.tag)),
                          name="labels" if sure is None else f"labels-{sure:g}-sure",
                          p_score=lambda req, digit: None if sure is None else sure if int(digit) == 1 else 1.0 - sure,
                          fail=lambda req: None if labels.get(req.tag) is not None else
                          f"trajectory {req.tag} has no 0/1 label")


class Labels:
    """The 0/1 labels of trajectories by id: sorted 16-byte digests and one byte each."""

    def __init__(self, trajs: Iterable[Trajectory]):
        ids, marks = IdBuilder(), bytearray()
        for t in trajs:
            if t.label in (0, 1):
                ids.add(t.id)
                marks.append(t.label)
        keys = ids.take()
        order = np.argsort(keys, kind="stable")
        self._keys, self._labels = keys[order], np.frombuffer(bytes(marks), dtype=np.uint8)[order]

    def get(self, i) -> int | None:
        """The label of id `i`, or None."""
        key = id_key(str(i))
        k = int(np.searchsorted(self._keys, key))
        return int(self._labels[k]) if k < len(self._keys) and self._keys[k] == key else None


def verdicts_teacher(verdicts: dict[str, Verdict], name: str) -> ScriptedEngine:
    """A teacher that replays verdict lines produced elsewhere (their `raw` text, and their
    `p_success` when the file has one)."""
    return ScriptedEngine(script=lambda req: verdicts[req.tag].raw, name=name,
                          p_score=lambda req, digit: verdicts[req.tag].p_success,
                          fail=lambda req: None if verdicts.get(req.tag) and verdicts[req.tag].raw else
                          f"no verdict with 'raw' text for {req.tag}")


def load_teacher_verdicts(path: str | Path) -> dict[str, Verdict]:
    """Verdict lines by id; each must carry `raw` (the teacher's full output)."""
    from ..evaluation.harness import load_verdicts

    out = {}
    for n, v in enumerate(load_verdicts(path), start=1):
        if not v.raw and v.status != "error":
            raise ValueError(f"{path}: line {n} (id {v.id}): field 'raw' is empty; --teacher-verdicts needs the "
                             "teacher's full output in 'raw'")
        out[str(v.id)] = v
    return out


# ----------------------------------------------------------------------------- records
def _side_calls(t: Trajectory, pipe: AdaptRubric):
    """This trajectory's route, and the prompts of its router call (None under rules routing) and cue call."""
    route = pipe.route_many([t.instruction])[t.instruction]
    rp = router_prompt(pipe.prompts, pipe.bank, t.instruction) if route.mode == "model" else None
    return route, rp, cue_prompt(pipe.prompts, t.instruction, route.category, pipe.bank.lookup(route.category))


def build_record(t: Trajectory, v: Verdict, rec: RecordingEngine, pipe: AdaptRubric, out: Path,
                 keep_images: bool) -> dict:
    """Everything the distillation keeps for one trajectory."""
    req, o = rec.verify[t.id]
    images = copy_images(req.images, out, t.id, keep_images)
    shown = Request(prompt=req.prompt, images=images, suffix=req.suffix)
    route, rp, cp = _side_calls(t, pipe)
    route_rec = {"category": route.category, "mode": route.mode, "parsed": route.parsed, "prompt": rp,
                 "response": None if rp is None else rec.by_prompt[rp].text if rp in rec.by_prompt else route.raw}
    cue = pipe.cues_many([(t.instruction, route.category)])[(t.instruction, route.category)]
    asked = cp in rec.by_prompt
    cue_rec = {"cues": list(cue.cues), "abstained": cue.abstained, "parsed": cue.parsed,
               "prompt": cp if asked else None, "response": rec.by_prompt[cp].text if asked else None}
    return {
        "id": t.id, "task_id": t.task_id or f"instruction: {t.instruction}", "label": t.label,
        "platform": t.platform, "instruction": t.instruction, "teacher": rec.name,
        "verify": verify_record(req.prompt, images, req.suffix, chat_messages(shown), o.text, o.reasoning, v,
                                o.hit_cap),
        "route": route_rec, "cue": cue_rec,
    }


def _side_call_error(t: Trajectory, pipe: AdaptRubric, rec: RecordingEngine) -> str | None:
    """The error of this trajectory's router or cue call, if one failed: the pipeline falls back
    (family "general", no cues), but a teacher's fallback is not what the teacher would have said."""
    _, rp, cp = _side_calls(t, pipe)
    for kind, p in (("router", rp), ("cue", cp)):
        o = rec.by_prompt.get(p)
        if o is not None and o.error:
            return f"{kind} call failed: {o.error}"
    return None


def read_ids(path: Path) -> IdSet:
    """Ids in a JSONL file written by this module, read without parsing its lines (each starts with
    its id); a torn last line is cut off."""
    path = Path(path)
    ids = IdBuilder()
    if path.is_file():
        repair_torn_tail(path)
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    ids.add(leading_id(line) or str(json.loads(line)["id"]))
    return ids.freeze()


def _done_ids(paths: dict[str, Path], cap: int) -> tuple[IdSet, set[str]]:
    """Ids a resumed run skips: collected (a digest set), and rejected for good (a truncated reply only
    when its cap was at least this run's; a reply cut by the server's context never), the rejections
    read line by line (the last per id decides)."""
    final = {str(r["id"]): r["reason"] != "context" and (r["reason"] != "truncated"
                                                          or r.get("max_new_tokens", 0) >= cap)
             for r in iter_jsonl(paths["rejected"])}
    return read_ids(paths["collected"]), {i for i, done in final.items() if done}


# ----------------------------------------------------------------------------- collect
def _file_outcome(t: Trajectory, v: Verdict, err: str | None, cap: int, config: CollectConfig,
                  paths: dict[str, Path], record) -> str:
    """Write one trajectory's outcome to the right file; returns its kind."""
    if err:
        append(paths["failures"], {"id": t.id, "error": err})
        return "failed"
    if v.hit_context or v.hit_cap:  # parsed or not: a thinking teacher cut in its reasoning may hold a draft verdict
        detail = ("the teacher's reply was cut by the server's context length (prompt + reply reached its "
                  f"max_model_len) before its token cap ({cap}) and before it ended; raise the server's "
                  "--max-model-len (or lower --teacher-max-visual-tokens)" if v.hit_context else
                  f"the teacher's reply was cut at its token cap ({cap}, finish_reason 'length') before it ended; "
                  "raise --teacher-max-new-tokens")
        append(paths["rejected"], {"id": t.id, "reason": "context" if v.hit_context else "truncated", "max_new_tokens":
                                   cap, "raw": v.raw, "detail": f"{detail} and run again with --resume"})
        return "truncated"
    if v.status == "unparsed":
        append(paths["rejected"], {"id": t.id, "reason": "unparsed", "detail": v.parse_error, "raw": v.raw})
        return "unparsed"
    if config.agree_with_labels and t.label in (0, 1) and v.score != t.label:
        append(paths["rejected"], {"id": t.id, "reason": "disagrees with label", "score": v.score,
                                   "label": t.label, "raw": v.raw})
        return "disagree"
    append(paths["collected"], record())
    return "collected"


def _pipelines(todo: Iterable[Trajectory], rec: RecordingEngine, pipe_config: PipelineConfig,
               groups: dict[str, PipelineConfig] | None) -> list[tuple[AdaptRubric, Iterable[Trajectory]]]:
    """One pipeline per distinct config (replayed verdicts fix route and cues per trajectory: those are
    grouped, the replayed file being in memory already); without `groups` one pipeline over the stream."""
    if not groups:
        return [(AdaptRubric(rec, pipe_config), todo)]
    pipes: dict[str, AdaptRubric] = {}
    by_cfg: dict[str, list[Trajectory]] = defaultdict(list)
    for t in todo:
        cfg = groups.get(t.id, pipe_config)
        key = json.dumps(asdict(cfg), sort_keys=True)
        if key not in pipes:
            pipes[key] = AdaptRubric(rec, cfg)
        by_cfg[key].append(t)
    return [(pipes[k], by_cfg[k]) for k in pipes]


class _Pass:
    """One pass over the stream: the trajectories to collect (neither collected nor rejected for good)
    handed out as the pipeline asks, each kept until its verdict comes (`flight`), and the counts the
    manifest needs."""

    def __init__(self, stream, collected: IdSet, rejected: set[str]):
        self.stream, self.collected, self.rejected = stream, collected, rejected
        self.tasks: set[str] = set()
        self.flight: dict[str, Trajectory] = {}
        self.skipped = self.bad = 0

    def __iter__(self) -> Iterator[Trajectory]:
        for _, x in self.stream.items():
            if isinstance(x, DataError):
                print(f"skipped: {x}", file=sys.stderr)
                self.bad += 1
                continue
            self.tasks.add(x.task_id or f"instruction: {x.instruction}")
            if x.id in self.rejected or x.id in self.collected:
                self.skipped += 1
                continue
            self.flight[x.id] = x
            yield x


def collect(data: str | Path, out: str | Path, teacher: Engine, pipe_config: PipelineConfig,
            config: CollectConfig | None = None, resume: bool = False, teacher_desc: dict | None = None,
            groups: dict[str, PipelineConfig] | None = None, progress: bool = True, loaded=None,
            labels: dict | None = None) -> dict:
    """Run the teacher over `data` into `out`; returns the summary (also in the manifest).
    `groups` maps trajectory id -> a per-trajectory pipeline config (replayed verdicts fix the
    teacher's route and cues per trajectory). `loaded`: `data` already loaded or a stream of it
    (formats/stream.py; with labels files applied: `labels` is their record, kept in the manifest);
    without it `data` is streamed, its records parsed batch by batch as the teacher asks for them."""
    from tqdm import tqdm

    config = config or CollectConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / v for k, v in FILES.items()}
    if not resume and any(paths[k].is_file() and paths[k].stat().st_size for k in ("collected", "rejected")):
        raise ValueError(f"{out} already holds collected data; pass --resume to continue it or choose another --out")
    stream = as_stream(loaded) if loaded is not None else stream_trajectories(data)
    cap = pipe_config.verify_max_new_tokens
    collected, rejected = _done_ids(paths, cap)
    paths["failures"].unlink(missing_ok=True)
    rec = RecordingEngine(teacher)
    walk = _Pass(stream, collected, rejected)
    runs = _pipelines(walk, rec, pipe_config, groups)
    counts = dict.fromkeys(("collected", "unparsed", "truncated", "disagree", "failed"), 0)
    left = stream.count(None, collected.keys) - len(rejected)
    bar = tqdm(total=max(0, left), unit="traj", desc="collecting", disable=not progress, dynamic_ncols=True)
    for pipe, trajs in runs:
        for v in pipe.iter_score(trajs):
            t = walk.flight.pop(str(v.id))
            err = v.error if v.status == "error" else _side_call_error(t, pipe, rec)
            kind = _file_outcome(t, v, err, cap, config, paths,
                                 partial(build_record, t, v, rec, pipe, out, config.copy_images))
            counts[kind] += 1
            rec.verify.pop(str(v.id), None)
            bar.update(1)
            bar.set_postfix(failed=counts["failed"], unparsed=counts["unparsed"], truncated=counts["truncated"])
    bar.close()
    bank_sha = runs[0][0].bank.sha if runs else load_bank(pipe_config.bank_path).sha
    meta = {"teacher": teacher_desc or {"name": teacher.name}, "pipeline": asdict(pipe_config),
            "collect": asdict(config), "bank_sha": bank_sha, "prompts_sha": load_prompts().sha,
            "data": str(data), "package_version": __version__, **({"labels": labels} if labels else {}),
            "this_run": {**counts, "resumed_past": walk.skipped, "bad_records": walk.bad}}
    return finalize(out, sorted(walk.tasks), config.val_fraction, config.seed, config.balance, meta)


def teacher_pipeline(kind: str, router: str | None = None, max_images: int = 10,
                     verify_max_new_tokens: int = 1024) -> PipelineConfig:
    """The pipeline a teacher runs: the paper's (model router, generated cues) for model teachers;
    rules routing and no cues for labels and replayed verdicts, which carry no router/cue answers."""
    model_teacher = kind in ("model", "url")
    return PipelineConfig(router=router or ("model" if model_teacher else "rules"), fine=model_teacher,
                          max_images=max_images, verify_max_new_tokens=verify_max_new_tokens)


def verdict_groups(verdicts: dict[str, Verdict], base: PipelineConfig) -> dict[str, PipelineConfig]:
    """Per-trajectory configs that rebuild what a replayed teacher saw: its family and its cues."""
    return {tid: replace(base, fixed_category=v.category or None, fine=bool(v.cues),
                         manual_cues=list(v.cues) if v.cues else None) for tid, v in verdicts.items()}
