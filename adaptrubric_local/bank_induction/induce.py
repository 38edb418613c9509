"""Bank induction (paper §4.1, Appendix B): from labelled trajectories to a rubric bank.

1. Sample: group labelled trajectories by a proposed family (the model-free rules router), take up to
   `per_family` successes and as many failures from each, at most `max_trajectories` in all.
2. Dimensions: show the teacher batches of sampled trajectories (instruction, compiled evidence,
   action trace, label, selected screenshots) and ask for the verification dimensions that separate
   success from failure. Each reply is kept in `<out>.work/dimensions.jsonl` as it arrives and reused
   by a rerun with the same sample.
3. Grouping: ask for task families with router line, description, verification steps, pitfalls,
   special rules and rubric items (or, with `keep_families`, for new texts of the paper's eight).
4. Write the bank: the paper's meta rule and output format kept, `source` and a build record
   (teacher, data, prompts, sample, calls) added, validated by the bank schema before it is written.
Knows nothing about argument parsing.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from ..bank import RubricBank, load_bank, load_cached
from ..engine.base import Engine, Request
from ..prompts import render
from ..route import route_rules
from ..schema import json_lines
from ..stages.context import select_context
from ..stages.evidence import compile_evidence
from ..types import Trajectory
from .prompts import InductionPrompts, load_induction_prompts
from .teacher import DimensionsReply, GroupingReply, Teacher, parse_reply

SECTIONS = ("verification_steps", "common_pitfalls", "special_rules")
TEXTS = ("description", *SECTIONS)  # what a family's rubric says, apart from its items


@dataclass
class InduceConfig:
    """How a bank is induced; saved in the bank's build record."""

    per_family: int = field(default=15, metadata={
        "help": "successes (and as many failures) sampled per proposed family"})
    max_trajectories: int = field(default=232, metadata={"help": "cap on sampled trajectories (paper: 232)"})
    per_call: int = field(default=8, metadata={"help": "trajectories shown to the teacher per dimensions call"})
    images_per_traj: int = field(default=3, metadata={"help": "screenshots shown per trajectory (0: none; else >= 2)"})
    max_families: int = field(default=8, metadata={
        "help": "most families the teacher may propose (the fallback included)"})
    keep_families: bool = field(default=False, metadata={
        "help": "keep the paper's 8 families; rewrite their texts only"})
    fallback: str = field(default="general", metadata={"help": "name of the fallback family of a new bank"})
    domain: str = field(default="GUI apps", metadata={"help": "how the prompts name the apps (e.g. 'our CRM web app')"})
    name: str = field(default="induced", metadata={"help": "the bank's name (on the command line: the --out file's)"})
    seed: int = field(default=0, metadata={"help": "sampling seed"})
    teacher_max_new_tokens: int = field(default=2048, metadata={"help": "token cap per teacher reply"})

    def __post_init__(self):
        for k in ("per_family", "max_trajectories", "per_call", "max_families", "teacher_max_new_tokens"):
            if getattr(self, k) < 1:
                raise ValueError(f"{k} must be >= 1, got {getattr(self, k)}")
        if self.images_per_traj == 1 or self.images_per_traj < 0:
            raise ValueError("images_per_traj must be 0 or >= 2 (the first and final frame)")
        if self.max_families < 2 and not self.keep_families:
            raise ValueError("max_families must be >= 2 (one family and the fallback)")


def _label(t: Trajectory) -> str:
    return "SUCCESS" if t.label == 1 else "FAILURE"


def evidence_fields(t: Trajectory) -> dict[str, str]:
    """A labelled trajectory's placeholders shared by the trajectory and case prompts."""
    return {"id": t.id, "label": _label(t), "instruction": t.instruction, **asdict(compile_evidence(t))}


def sample(trajs: list[Trajectory], cfg: InduceConfig) -> tuple[list[Trajectory], dict[str, dict[str, int]]]:
    """Balanced sample per proposed family (rules router), shuffled; and the counts drawn per family."""
    rng = random.Random(cfg.seed)
    groups: dict[str, dict[int, list[Trajectory]]] = defaultdict(lambda: {0: [], 1: []})
    for t in trajs:
        if t.label in (0, 1):
            groups[route_rules(t.instruction).category][t.label].append(t)
    picked: list[tuple[str, Trajectory]] = []
    for fam in sorted(groups):
        g = groups[fam]
        for lab in (0, 1):
            rng.shuffle(g[lab])
        n = min(cfg.per_family, max(len(g[0]), len(g[1])))
        picked += [(fam, t) for t in g[1][:n] + g[0][:n]]
    rng.shuffle(picked)
    picked = picked[:cfg.max_trajectories]
    counts = {fam: {"success": sum(f == fam and t.label == 1 for f, t in picked),
                    "failed": sum(f == fam and t.label == 0 for f, t in picked)} for fam in sorted(groups)}
    return [t for _, t in picked], counts


def dimensions_request(ps: InductionPrompts, chunk: list[Trajectory], cfg: InduceConfig) -> Request:
    """The dimensions request for one batch of trajectories (text, then all their screenshots)."""
    n = cfg.images_per_traj
    images = [select_context(t, route_rules(t.instruction).category, n).paths(t) if n and t.screenshots else []
              for t in chunk]
    text = "\n\n".join(render(ps.trajectory, "trajectory", n_images=str(len(im)), **evidence_fields(t))
                        for t, im in zip(chunk, images))
    prompt = render(ps.dimensions, "dimensions", n_trajectories=str(len(chunk)), domain=cfg.domain, trajectories=text)
    return Request(prompt=prompt, images=[p for im in images for p in im], suffix=render(ps.dimensions_suffix, "s"),
                   kind="induce", max_new_tokens=cfg.teacher_max_new_tokens)


def _sha16(obj) -> str:
    return hashlib.sha256(json.dumps(obj).encode()).hexdigest()[:16]


def collect_dimensions(teacher: Teacher, ps: InductionPrompts, picked: list[Trajectory], cfg: InduceConfig,
                       work: Path) -> tuple[list[dict], list[str]]:
    """Dimensions from every batch (cached in work/dimensions.jsonl); and the problems met."""
    cache_file = work / "dimensions.jsonl"
    lines = cache_file.read_text(encoding="utf-8").splitlines() if cache_file.exists() else []
    cached = {rec["key"]: rec["dimensions"] for _, rec in json_lines(lines, cache_file)}
    chunks = [picked[i:i + cfg.per_call] for i in range(0, len(picked), cfg.per_call)]
    keys = [_sha16([[t.id for t in c], cfg.images_per_traj, cfg.domain, ps.sha]) for c in chunks]
    todo = [i for i, k in enumerate(keys) if k not in cached]
    problems = []
    if todo:
        outs = teacher.ask([dimensions_request(ps, chunks[i], cfg) for i in todo],
                           [f"dimensions:{keys[i]}" for i in todo])
        with open(cache_file, "a", encoding="utf-8") as f:
            for i, out in zip(todo, outs):
                reply, why = (None, out.error) if out.error else parse_reply(out.text, DimensionsReply)
                if reply is None:
                    problems.append(f"dimensions call {i + 1}/{len(chunks)}"
                                    + (f" failed: {why}" if out.error else f": unparseable reply ({why})"))
                    continue
                cached[keys[i]] = dims = [d.model_dump() for d in reply.dimensions]
                f.write(json.dumps({"key": keys[i], "ids": [t.id for t in chunks[i]], "dimensions": dims},
                                   ensure_ascii=False) + "\n")
    return [d for k in keys if k in cached for d in cached[k]], problems


def grouping_request(ps: InductionPrompts, dims: list[dict], picked: list[Trajectory], cfg: InduceConfig,
                     base: RubricBank) -> Request:
    """The grouping request (new families, or new texts for the base bank's families)."""
    common = {"domain": cfg.domain, "instructions": "\n".join(f"- [{_label(t)}] {t.instruction}" for t in picked),
              "dimensions": "\n".join(f"- {d['name']}: {d['check']}" + (
                  f" Failure pattern: {d['failure_pattern']}" if d.get("failure_pattern") else "")
                  + (f" (task kind: {d['task_kind']})" if d.get("task_kind") else "") for d in dims)}
    if cfg.keep_families:
        fams = yaml.safe_dump({n: rs.model_dump(include=set(TEXTS)) for n, rs in base.families.items()},
                              sort_keys=False, allow_unicode=True, width=10_000)
        prompt = render(ps.grouping_keep, "grouping_keep", families=fams.strip(), **common)
    else:
        prompt = render(ps.grouping, "grouping", max_families=str(cfg.max_families), fallback=cfg.fallback, **common)
    return Request(prompt=prompt, kind="induce", max_new_tokens=cfg.teacher_max_new_tokens)


def build_bank_doc(reply: GroupingReply, cfg: InduceConfig, base: RubricBank) -> tuple[dict, list[str]]:
    """The bank document from the teacher's grouping; and the notes on what was repaired or left."""
    notes: list[str] = []
    doc = base.model_dump(mode="json", exclude={"record"})
    doc["name"] = cfg.name
    if cfg.keep_families:
        seen = set()
        for f in reply.families:
            if f.name not in doc["families"]:
                notes.append(f"teacher named unknown family {f.name!r}; ignored (--keep-families)")
                continue
            seen.add(f.name)
            doc["families"][f.name].update({k: getattr(f, k) for k in TEXTS if getattr(f, k)})
        notes += [f"family {n}: no new text from the teacher; kept" for n in doc["families"] if n not in seen]
        return doc, notes
    doc["taxonomy"] = "custom"
    fams: dict[str, dict] = {}
    general = base.families[base.fallback].model_dump(mode="json")
    for f in reply.families:
        name = re.sub(r"[^a-z0-9]+", "_", f.name.lower()).strip("_")
        name = (name if name and name[0].isalpha() else f"f_{name}")[:48]
        if name != f.name:
            notes.append(f"family name {f.name!r} written as {name!r}")
        if name in fams:
            notes.append(f"duplicate family {name!r} dropped")
            continue
        missing = [k for k in TEXTS if not getattr(f, k)]
        if missing and name != cfg.fallback:
            notes.append(f"family {name!r} dropped: the teacher gave no {', '.join(missing)}")
            continue
        items = f.rubric_items or [{"name": s[:60], "criticality": "critical"}
                                   for s in (f.verification_steps or [])[:2]]
        items = [i if isinstance(i, dict) else i.model_dump() for i in items]
        if not any(i["criticality"] == "critical" for i in items):
            items[0]["criticality"] = "critical"
            notes.append(f"family {name!r}: no critical rubric item; the first one made critical")
        entry = {"id": f"RSET_{name.upper()}", "categories": [name], **{k: getattr(f, k) for k in TEXTS},
                 "output_format": general["output_format"],
                 "rubric_items": [{"id": f"R{n}", "name": i["name"], "criticality": i["criticality"]}
                                  for n, i in enumerate(items, 1)],
                 "router_description": f.router_description or f.description}
        if name == cfg.fallback:  # the fallback keeps whatever the teacher left out from the paper's general
            entry = {**general, **{k: v for k, v in entry.items() if v}, "categories": ["*"],
                     "router_description": f.router_description or None}
        fams[name] = entry
    if cfg.fallback not in fams:
        fams[cfg.fallback] = {**general, "categories": ["*"], "id": f"RSET_{cfg.fallback.upper()}"}
        notes.append(f"the teacher proposed no fallback family; the paper's general rubric added as {cfg.fallback!r}")
    if len(fams) > cfg.max_families:
        notes.append(f"the teacher proposed {len(fams)} families, more than max_families={cfg.max_families}; kept all")
    fams[cfg.fallback] = fams.pop(cfg.fallback)  # fallback last
    doc["families"] = fams
    return doc, notes


def reload_bank(path: Path) -> RubricBank:
    """Load a bank file just written (bypassing the loader's cache of earlier contents)."""
    load_cached.cache_clear()
    return load_bank(path)


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks (|-), as in the bundled bank."""


_BlockDumper.add_representer(str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s
                                                                  else None))


def write_atomic(path: Path, text: str) -> None:
    """Write `text` through a temporary file, so that a reader never sees half of it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_bank(bank: RubricBank, out: Path, header: str) -> None:
    """Write a validated bank as YAML (atomically), with a comment header."""
    body = yaml.dump(bank.model_dump(mode="json", exclude_none=True), Dumper=_BlockDumper, sort_keys=False,
                     allow_unicode=True, width=10_000)
    write_atomic(out, "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines()) + body)


def build_step(step: str, teacher: Teacher, data: str, ps: InductionPrompts, calls: int, details: dict) -> dict:
    """One entry of a bank's build record (`bank.BuildStep`)."""
    return {"step": step, "teacher": teacher.name, "data": data, "prompts": ps.path, "prompts_sha": ps.sha,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "teacher_calls": calls, "details": details}


def induce(trajs: list[Trajectory], out: str | Path, teacher_engine: Engine, cfg: InduceConfig | None = None,
           data_desc: str = "", prompts: InductionPrompts | None = None, base_bank: str | None = None) -> dict:
    """Induce a bank from labelled trajectories and write it to `out`; returns a summary dict.

    Raises ValueError when the data has no labelled success or failure, or when the grouping step
    gives nothing usable (the dimensions gathered so far stay in `<out>.work/`)."""
    cfg = cfg or InduceConfig()
    ps = prompts or load_induction_prompts()
    out = Path(out)
    base = load_bank(base_bank)
    labelled = [t for t in trajs if t.label in (0, 1)]
    if not any(t.label == 1 for t in labelled) or not any(t.label == 0 for t in labelled):
        raise ValueError(f"{data_desc or 'the data'}: induction needs labelled successes and failures "
                         f"(found {sum(t.label == 1 for t in labelled)} and {sum(t.label == 0 for t in labelled)})")
    work = out.with_name(out.name + ".work")
    work.mkdir(parents=True, exist_ok=True)
    teacher = Teacher(teacher_engine, log=work / "teacher.jsonl", max_new_tokens=cfg.teacher_max_new_tokens)
    picked, counts = sample(labelled, cfg)
    dims, problems = collect_dimensions(teacher, ps, picked, cfg, work)
    if not dims:
        raise ValueError("no verification dimensions from the teacher: " + "; ".join(problems[:5])
                         + f" (replies in {work / 'teacher.jsonl'})")
    out_g = teacher.ask([grouping_request(ps, dims, picked, cfg, base)], ["grouping"])[0]
    if out_g.error:
        raise ValueError(f"grouping call failed: {out_g.error} (dimensions kept in {work}; rerun to reuse them)")
    reply, why = parse_reply(out_g.text, GroupingReply)
    if reply is None:
        raise ValueError(f"the teacher's grouping reply could not be read: {why} (reply in {work / 'teacher.jsonl'})")
    doc, notes = build_bank_doc(reply, cfg, base)
    doc["source"] = (f"induced by adaptrubric bank induce (teacher {teacher.name}) from {data_desc or 'labelled data'}"
                     + ("; texts of the paper's families rewritten" if cfg.keep_families else ""))
    doc["record"] = [build_step("induce", teacher, data_desc, ps, teacher.calls, {
        "data_sha": _sha16(sorted((t.id, t.label) for t in labelled)), "sampled": len(picked),
        "sampled_success": sum(t.label == 1 for t in picked), "sampled_failed": sum(t.label == 0 for t in picked),
        "dimensions": len(dims), "teacher_failed_calls": teacher.failed, "teacher_tokens": teacher.tokens,
        "config": json.dumps(asdict(cfg)), "notes": "; ".join(notes + problems) or None})]
    bank = RubricBank.model_validate(doc)
    header = (f"Rubric bank induced by `adaptrubric bank induce` (teacher: {teacher.name}).\n"
              f"Data: {data_desc} ({len(picked)} sampled trajectories); prompts: {ps.path} (sha {ps.sha}).\n"
              "Check it with `adaptrubric bank validate PATH`; read every family before using it for rewards.")
    write_bank(bank, out, header)
    reload_bank(out)  # what was written loads back through the strict schema
    (work / "sample.json").write_text(json.dumps({"per_family": counts, "ids": [t.id for t in picked]}, indent=2))
    return {"bank": str(out), "families": list(bank.families), "sha": bank.sha, "sampled": len(picked),
            "per_family": counts, "dimensions": len(dims), "teacher_calls": teacher.calls,
            "teacher_failed": teacher.failed, "teacher_tokens": teacher.tokens, "notes": notes + problems}
