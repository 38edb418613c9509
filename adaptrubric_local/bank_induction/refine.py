"""Disagreement-driven refinement of a rubric bank (paper §4.1: "whenever the rubric judgment
disagrees with the trajectory label, we ask the LLM to revise it").

DEV is split by task into a refine split, whose disagreement cases (rubric, evidence, verdict, label)
the teacher sees, and a validation split it never sees. Each round, the teacher proposes new
verification steps, pitfalls and special rules for every family with disagreements; a revision is
kept only if it raises validation accuracy. Routes and cues do not depend on those sections, so they
are computed once, and each revision changes only its own family's verdicts (kept revisions add up).

Written as it goes, atomically: DIR/round_K.yaml (round 0: the input bank), DIR/round_K.diff.md
(per family: decision, validation accuracy before/after, diff), DIR/report.json and report.md
(accuracy/F1 per round, split and family), DIR/teacher.jsonl (every teacher call). A teacher that
fails on one family leaves it as it was; one that fails on every call stops the run before the round
is written, and `resume` continues from the last round on disk. Knows nothing about argument parsing.
"""
from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from ..bank import RubricBank, load_bank
from ..engine.base import Engine, Request
from ..evaluation.metrics import classification, predicted
from ..pipeline import AdaptRubric, PipelineConfig
from ..prompts import render
from ..types import Trajectory, Verdict
from .induce import SECTIONS, build_step, evidence_fields, reload_bank, write_atomic, write_bank
from .prompts import InductionPrompts, load_induction_prompts
from .teacher import RevisionReply, Teacher, parse_reply


@dataclass
class RefineConfig:
    """How a bank is refined; saved in the report."""

    rounds: int = field(default=2, metadata={"help": "refinement rounds"})
    val_fraction: float = field(default=0.5, metadata={"help": "share of DEV tasks held out for validation"})
    max_cases: int = field(default=8, metadata={"help": "disagreement cases shown to the teacher per family"})
    min_gain: float = field(default=0.0, metadata={"help": "a revision is kept when validation accuracy rises "
                                                           "by more than this many points"})
    seed: int = field(default=0, metadata={"help": "split seed"})
    teacher_max_new_tokens: int = field(default=2048, metadata={"help": "token cap per teacher reply"})
    max_output_chars: int = field(default=1500, metadata={"help": "verifier output shown per case (characters)"})

    def __post_init__(self):
        for k in ("rounds", "max_cases"):
            if getattr(self, k) < 1:
                raise ValueError(f"{k} must be >= 1, got {getattr(self, k)}")
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.min_gain < 0:
            raise ValueError(f"min_gain must be >= 0, got {self.min_gain}")


def split(trajs: list[Trajectory], val_fraction: float, seed: int = 0) -> tuple[list[Trajectory], list[Trajectory]]:
    """(refine, validation) split by task (task_id, else id), stable across runs and orderings."""
    def h(t: Trajectory) -> float:
        return int(hashlib.sha256(f"{seed}:{t.task_id or t.id}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF

    dev = [t for t in trajs if h(t) >= val_fraction]
    val = [t for t in trajs if h(t) < val_fraction]
    if not dev or not val:
        raise ValueError(f"the DEV data ({len(trajs)} labelled trajectories, "
                         f"{len({t.task_id or t.id for t in trajs})} tasks) is too small to split into a refine "
                         f"and a validation part with val_fraction={val_fraction}")
    return dev, val


def _metrics(verdicts: list[Verdict]) -> dict:
    c = classification(verdicts) if verdicts else {"n": 0, "acc": None, "f1": None}
    return {k: c[k] for k in ("n", "acc", "f1")}


def _acc(verdicts: dict[str, Verdict]) -> float:
    vs = list(verdicts.values())
    return 100.0 * sum(predicted(v) == v.label for v in vs) / len(vs) if vs else 0.0


def _family_text(bank: RubricBank, fam: str) -> str:
    return yaml.safe_dump(bank.families[fam].model_dump(include=set(SECTIONS)), sort_keys=False, allow_unicode=True,
                          width=10_000)


def refine_request(ps: InductionPrompts, bank: RubricBank, fam: str, cases: list[tuple[Trajectory, Verdict]],
                   n_agree: int, cfg: RefineConfig) -> Request:
    """The teacher request revising one family from its disagreement cases."""
    text = "\n\n".join(render(ps.case, "case", n=str(n), **evidence_fields(t),
                              verdict=f"SCORE {v.score}" if v.status == "ok" else f"no verdict ({v.status})",
                              verifier_output=(v.raw or v.error or "")[:cfg.max_output_chars])
                       for n, (t, v) in enumerate(cases, 1))
    prompt = render(ps.refine, "refine", family=fam, description=bank.families[fam].description,
                    rubric=_family_text(bank, fam).strip(), n_agree=str(n_agree), n_cases=str(len(cases)), cases=text)
    return Request(prompt=prompt, kind="refine", max_new_tokens=cfg.teacher_max_new_tokens)


def with_sections(bank: RubricBank, fam: str, rev: RevisionReply) -> RubricBank:
    """`bank` with one family's three sections replaced (validated)."""
    doc = bank.model_dump(mode="json")
    doc["families"][fam].update({k: list(getattr(rev, k)) for k in SECTIONS})
    return RubricBank.model_validate(doc)


def family_diff(old: RubricBank, new: RubricBank, fam: str) -> str:
    """Unified diff of one family's sections."""
    return "".join(difflib.unified_diff(_family_text(old, fam).splitlines(True),
                                        _family_text(new, fam).splitlines(True), f"{fam} (before)", f"{fam} (after)"))


@dataclass
class Refiner:
    """One refinement run writing into `out`."""

    dev: list[Trajectory]
    val: list[Trajectory]
    verifier: Engine
    teacher: Teacher
    pipe_cfg: PipelineConfig
    cfg: RefineConfig
    ps: InductionPrompts
    out: Path
    data_desc: str
    log: Callable[[str], None]
    verifier_calls: int = 0
    base: AdaptRubric | None = None  # the pipeline of the first bank, whose routes and cues every bank reuses

    def __post_init__(self):
        self.by_id = {t.id: t for t in self.dev + self.val}

    def score(self, bank: RubricBank, trajs: list[Trajectory]) -> dict[str, Verdict]:
        """Verdicts by trajectory id, with routes and cues computed once (with the first bank)."""
        if not trajs:
            return {}
        pipe = AdaptRubric(self.verifier, self.pipe_cfg, bank=bank)
        self.base.route_many(t.instruction for t in trajs)
        self.base.cues_many((t.instruction, self.base.criteria.routes[t.instruction].category) for t in trajs)
        pipe.criteria.routes, pipe.criteria.cues = self.base.criteria.routes, self.base.criteria.cues
        self.verifier_calls += len(trajs)
        return {v.id: v for v in pipe.score(trajs)}

    def metrics(self, bank: RubricBank, dv: dict[str, Verdict], vv: dict[str, Verdict]) -> dict:
        """Accuracy/F1 on both splits, overall and per family."""
        fams = {fam: {"refine": _metrics(d := [v for v in dv.values() if v.category == fam]),
                      "val": _metrics([v for v in vv.values() if v.category == fam]),
                      "disagreements": sum(predicted(v) != v.label for v in d)} for fam in bank.families}
        return {"bank_sha": bank.sha, "refine": _metrics(list(dv.values())), "val": _metrics(list(vv.values())),
                "families": fams}

    def revise(self, k: int, bank: RubricBank, dv: dict[str, Verdict], vv: dict[str, Verdict]
               ) -> tuple[RubricBank, dict, list[str], bool]:
        """One round's revisions: (new bank, decision per family, diff sections, teacher alive)."""
        wrong = [v for v in dv.values() if predicted(v) != v.label]
        bad = {f: cases for f in bank.families if (cases := [v for v in wrong if v.category == f])}
        fams, decisions = list(bad), {f: {"decision": "no disagreements"} for f in bank.families if f not in bad}
        if not fams:
            return bank, decisions, [], True
        reqs = [refine_request(self.ps, bank, f, [(self.by_id[v.id], v) for v in bad[f][: self.cfg.max_cases]],
                               sum(v.category == f for v in dv.values()) - len(bad[f]), self.cfg) for f in fams]
        outs = self.teacher.ask(reqs, [f"round{k}:{f}" for f in fams])
        base_acc, new_bank, diffs = _acc(vv), bank, []
        for fam, out in zip(fams, outs):
            d = {"disagreements": len(bad[fam])}
            rev, why = (None, out.error) if out.error else parse_reply(out.text, RevisionReply)
            if rev is None:
                decisions[fam] = {**d, "decision": "teacher error" if out.error else "teacher reply unparseable",
                                  "error": why}
                continue
            cand = with_sections(bank, fam, rev)
            mine = [self.by_id[i] for i, v in vv.items() if v.category == fam]
            acc = _acc({**vv, **self.score(cand, mine)})
            keep = acc > base_acc + self.cfg.min_gain
            decisions[fam] = {**d, "decision": "kept" if keep else "rejected", "val_acc_before": base_acc,
                              "val_acc_after": acc, "val_n_family": len(mine), "rationale": rev.rationale}
            if keep:
                new_bank = with_sections(new_bank, fam, rev)
            diffs.append(f"## {fam}: {decisions[fam]['decision']} (validation accuracy {base_acc:.1f} -> {acc:.1f} "
                         f"on {len(vv)} trajectories, {len(mine)} of them in this family)\n\n"
                         f"```diff\n{family_diff(bank, cand, fam)}```\n")
        return new_bank, decisions, diffs, not all(o.error for o in outs)

    def run(self, bank: RubricBank, start: int, report: dict) -> dict:
        """Rounds start+1..cfg.rounds from `bank` (the bank of round `start`)."""
        self.base = AdaptRubric(self.verifier, self.pipe_cfg, bank=bank)
        for k in range(start, self.cfg.rounds + 1):
            self.log(f"round {k}: scoring {len(self.dev)} refine + {len(self.val)} validation trajectories")
            dv, vv = self.score(bank, self.dev), self.score(bank, self.val)
            if not any(r["round"] == k for r in report["rounds"]):
                report["rounds"].append({"round": k})
            next(r for r in report["rounds"] if r["round"] == k).update(self.metrics(bank, dv, vv))
            self._write_report(report)
            if k == self.cfg.rounds:
                break
            new_bank, decisions, diffs, alive = self.revise(k + 1, bank, dv, vv)
            if not alive:
                report["status"] = (f"stopped in round {k + 1}: every teacher call failed "
                                    f"({next(d['error'] for d in decisions.values() if 'error' in d)}); rounds up "
                                    f"to {k} are written; rerun with --resume to continue")
                self._write_report(report)
                return report
            new_bank = self._stamp(new_bank, k + 1, decisions)
            header = (f"Round {k + 1} of `adaptrubric bank refine` (data: {self.data_desc}).\n"
                      f"Diff: round_{k + 1}.diff.md")
            write_atomic(self.out / f"round_{k + 1}.diff.md", f"# Round {k + 1}\n\n"
                        + "".join(f"- {f}: {d['decision']}\n" for f, d in decisions.items()) + "\n" + "\n".join(diffs))
            write_bank(new_bank, self.out / f"round_{k + 1}.yaml", header)
            report["rounds"].append({"round": k + 1, "changes": decisions})
            self._write_report(report)
            bank = new_bank
        report.update(status="done", final_bank=str(self.out / f"round_{self.cfg.rounds}.yaml"))
        self._write_report(report)
        return report

    def _stamp(self, bank: RubricBank, k: int, decisions: dict) -> RubricBank:
        doc = bank.model_dump(mode="json")
        kept = sorted(f for f, d in decisions.items() if d["decision"] == "kept")
        calls = sum(d["decision"] != "no disagreements" for d in decisions.values())
        doc["record"].append(build_step(f"refine round {k}", self.teacher, self.data_desc, self.ps, calls, {
            "kept": ", ".join(kept) or None, "refine_n": len(self.dev), "val_n": len(self.val)}))
        return RubricBank.model_validate(doc)

    def _write_report(self, report: dict) -> None:
        report["teacher"] = {"name": self.teacher.name, "calls": self.teacher.calls, "failed": self.teacher.failed,
                             "tokens": self.teacher.tokens}
        report["verifier_calls"] = self.verifier_calls
        write_atomic(self.out / "report.json", json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        write_atomic(self.out / "report.md", report_markdown(report))


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def report_markdown(report: dict) -> str:
    """The report as a Markdown table per round and per family."""
    lines = [f"# Bank refinement: {report['bank']}", "", f"Data: {report['data']} (refine {report['n_refine']}, "
             f"validation {report['n_val']}); status: {report.get('status', 'running')}", "",
             "| round | refine acc | refine F1 | val acc | val F1 | bank sha |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {_fmt(r['refine']['acc'])} | {_fmt(r['refine']['f1'])} | {_fmt(r['val']['acc'])} | "
              f"{_fmt(r['val']['f1'])} | {r['bank_sha']} |" for r in report["rounds"] if "val" in r]
    lines += ["", "Per family (validation acc / F1 / n; refine disagreements; decision that made this round's bank):",
              "", "| round | family | val acc | val F1 | val n | refine disagreements | decision |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {fam} | {_fmt(m['val']['acc'])} | {_fmt(m['val']['f1'])} | {m['val']['n']} | "
              f"{m['disagreements']} | {r.get('changes', {}).get(fam, {}).get('decision', '')} |"
              for r in report["rounds"] for fam, m in r.get("families", {}).items()]
    return "\n".join(lines) + "\n"


def refine(trajs: list[Trajectory], bank_path: str | Path, out: str | Path, verifier: Engine, teacher_engine: Engine,
           cfg: RefineConfig | None = None, pipe_cfg: PipelineConfig | None = None, data_desc: str = "",
           prompts: InductionPrompts | None = None, resume: bool = False,
           log: Callable[[str], None] = lambda s: None) -> dict:
    """Refine the bank at `bank_path` on labelled `trajs`, writing into `out`; returns the report."""
    cfg = cfg or RefineConfig()
    ps = prompts or load_induction_prompts()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    labelled = [t for t in trajs if t.label in (0, 1)]
    dev, val = split(labelled, cfg.val_fraction, cfg.seed)
    pipe_cfg = pipe_cfg or PipelineConfig()
    teacher = Teacher(teacher_engine, log=out / "teacher.jsonl", max_new_tokens=cfg.teacher_max_new_tokens)
    report_file = out / "report.json"
    done = sorted(int(p.stem.split("_")[1]) for p in out.glob("round_*.yaml") if p.stem.split("_")[1].isdigit())
    if resume and done and report_file.exists():
        report = json.loads(report_file.read_text())
        start = done[-1]
        report["rounds"] = [r for r in report["rounds"] if r["round"] <= start]
        bank = reload_bank(out / f"round_{start}.yaml")
        log(f"resuming from round {start}")
    else:
        if done and not resume:
            raise ValueError(f"{out} already holds round files; use --resume to continue or another --out")
        bank = load_bank(bank_path)
        write_bank(bank, out / "round_0.yaml", f"Round 0 of `adaptrubric bank refine`: the input bank {bank_path}.")
        start = 0
        report = {"bank": str(bank_path), "data": data_desc, "n_refine": len(dev), "n_val": len(val),
                  "val_ids": sorted(t.id for t in val), "config": asdict(cfg), "pipeline": asdict(pipe_cfg),
                  "prompts": ps.path, "prompts_sha": ps.sha, "rounds": []}
    return Refiner(dev, val, verifier, teacher, pipe_cfg, cfg, ps, out, data_desc, log).run(bank, start, report)
