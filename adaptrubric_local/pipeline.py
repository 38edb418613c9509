"""The AdaptRubric orchestrator: runs the stages for a list of trajectories, in batches.

route (rules or model) -> bank lookup -> fine cues (model, cached) -> context selection -> evidence
-> fusion -> engine -> verdict. Routes and cues are cached per instruction, so the candidates of a
GRPO group or a best-of-N pool share one router call and one cue call. Counts model calls and
tokens per request kind. A failure in one trajectory becomes a Verdict with status "error"; the
others still get theirs. Only this module talks to the engine; it knows nothing about tensors.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable, Iterator, Optional

from . import __version__
from .bank import RubricBank, RubricSet, load_bank
from .context import DEFAULT_BUDGET, Selection, select_context, thumbnail_fingerprint, thumbnails_close
from .cues import cue_prompt, manual_cues, parse_cues
from .engine.base import Engine, Output, Request
from .evidence import compile_evidence
from .fusion import ABLATIONS, VerifierPrompt, fuse
from .prompts import PromptSet, load_prompts, render
from .route import parse_router_output, route_rules
from .types import FAMILIES, CueResult, RouteResult, Trajectory, Verdict
from .verdict import parse_verdict, score_value_offset


@dataclass
class PipelineConfig:
    """Settings of one AdaptRubric run; saved as JSON next to what it produced."""

    router: str = field(default="rules", metadata={"help": "rules (no model) or model (the paper's router prompt)"})
    coarse: bool = field(default=True, metadata={"help": "include the family rubric (Rc) in the verifier prompt"})
    fine: bool = field(default=True, metadata={"help": "generate and include fine cues (Rf)"})
    max_images: int = field(default=DEFAULT_BUDGET, metadata={"help": "screenshot budget M per trajectory"})
    batch_size: int = field(default=32, metadata={"help": "trajectories handed to the engine per call (the engine "
                                                              "splits them into GPU batches and overlaps their images)"})
    dedupe_frames: bool = field(default=True, metadata={"help": "drop near-duplicate neighbouring frames"})
    route_max_new_tokens: int = field(default=16, metadata={"help": "token cap for router outputs"})
    cue_max_new_tokens: int = field(default=128, metadata={"help": "token cap for cue outputs"})
    verify_max_new_tokens: int = field(default=256, metadata={"help": "token cap for verifier outputs"})
    fixed_category: Optional[str] = field(default=None, metadata={"help": "skip routing; use this family"})
    manual_cues: Optional[list[str]] = field(default=None, metadata={"help": "use these cues instead of generating"})
    bank_path: Optional[str] = field(default=None, metadata={"help": "rubric bank YAML (default: bundled)"})

    def __post_init__(self):
        if self.router not in ("rules", "model"):
            raise ValueError(f"router must be 'rules' or 'model', got {self.router!r}")
        if self.max_images < 2:
            raise ValueError(f"max_images must be >= 2 (first and final frame), got {self.max_images}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        for name in ("route_max_new_tokens", "cue_max_new_tokens", "verify_max_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.fixed_category is not None and self.fixed_category not in FAMILIES:
            raise ValueError(f"fixed_category must be one of {', '.join(FAMILIES)}, got {self.fixed_category!r}")

    @property
    def ablation(self) -> str:
        """The Table 4 row these switches give."""
        return next(name for name, switches in ABLATIONS.items() if switches == (self.coarse, self.fine))

    def to_json(self, path: str | Path) -> None:
        """Write the config (and package version) as JSON."""
        Path(path).write_text(json.dumps({**asdict(self), "package_version": __version__}, indent=2) + "\n")

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name -> help text."""
        return {f.name: f.metadata.get("help", "") for f in fields(cls)}


@dataclass
class Prepared:
    """Everything decided about one trajectory before the verifier call."""

    traj: Trajectory
    route: RouteResult
    rubric: RubricSet
    cues: CueResult
    selection: Selection
    prompt: VerifierPrompt

    @property
    def images(self) -> list[str]:
        """Selected screenshot paths, chronological."""
        return self.selection.paths(self.traj)


class AdaptRubric:
    """Score trajectories with the AdaptRubric method through one batched engine."""

    def __init__(self, engine: Optional[Engine] = None, config: Optional[PipelineConfig] = None,
                 bank: Optional[RubricBank] = None, prompts: Optional[PromptSet] = None):
        self.engine = engine
        self.config = config or PipelineConfig()
        self.bank = bank or load_bank(self.config.bank_path)
        self.prompts = prompts or load_prompts()
        if engine is None and self.config.router == "model":
            raise ValueError("router='model' needs an engine; use router='rules' to run without a model")
        self.stats: Counter = Counter()
        self._routes: dict[str, RouteResult] = {}
        self._cues: dict[tuple[str, str], CueResult] = {}
        self._fp = (thumbnail_fingerprint, thumbnails_close) if self.config.dedupe_frames else (None, None)
        self._pool: Optional[ThreadPoolExecutor] = None

    # ------------------------------------------------------------------ engine accounting
    def _call(self, requests: list[Request]) -> list[Output]:
        if not requests:
            return []
        outs = self.engine.generate(requests)
        for req, out in zip(requests, outs):
            self.stats[f"calls_{req.kind}"] += 1
            self.stats["calls"] += 1
            self.stats["prompt_tokens"] += out.prompt_tokens
            self.stats["completion_tokens"] += out.completion_tokens
        return outs

    # ------------------------------------------------------------------ stages
    def route_many(self, instructions: Iterable[str]) -> dict[str, RouteResult]:
        """Route each distinct instruction once (cached across calls)."""
        instructions = list(instructions)
        todo = [i for i in dict.fromkeys(instructions) if i not in self._routes]
        if self.config.fixed_category:
            for ins in todo:
                self._routes[ins] = RouteResult(category=self.config.fixed_category, mode="fixed")
        elif self.config.router == "rules":
            for ins in todo:
                self._routes[ins] = route_rules(ins)
        else:
            reqs = [Request(prompt=render(self.prompts.router, "router", instruction=ins), kind="route",
                            max_new_tokens=self.config.route_max_new_tokens) for ins in todo]
            for ins, out in zip(todo, self._call(reqs)):
                res = parse_router_output(out.text) if not out.error else RouteResult(
                    category="general", mode="model", raw=out.error, parsed=False)
                self.stats["route_unparsed"] += not res.parsed
                self._routes[ins] = res
        return {i: self._routes[i] for i in instructions}

    def cues_many(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], CueResult]:
        """Fine cues for each distinct (instruction, category), generated once (cached)."""
        pairs = list(dict.fromkeys(pairs))
        if not self.config.fine:  # not cached: a later run with the fine stage on must generate them
            return {p: CueResult(abstained=True, reason="fine stage off") for p in pairs}
        todo = [p for p in pairs if p not in self._cues]
        if self.config.manual_cues is not None or self.engine is None:
            for ins, cat in todo:
                self._cues[(ins, cat)] = manual_cues(self.config.manual_cues or [], ins)
        else:
            reqs = [Request(prompt=cue_prompt(self.prompts, ins, cat, self.bank.lookup(cat)), kind="cue",
                            max_new_tokens=self.config.cue_max_new_tokens) for ins, cat in todo]
            for p, out in zip(todo, self._call(reqs)):
                res = parse_cues(out.text, p[0]) if not out.error else CueResult(
                    abstained=True, reason=f"cue call failed: {out.error}", parsed=False)
                self.stats["cue_unparsed"] += not res.parsed
                self._cues[p] = res
        return {p: self._cues[p] for p in pairs}

    def prepare(self, traj: Trajectory) -> Prepared:
        """Route, cue, select and fuse for one trajectory (uses the caches)."""
        return self.prepare_many([traj])[0]

    def prepare_many(self, trajs: list[Trajectory]) -> list[Prepared | Exception]:
        """Prepare a batch; a trajectory that fails comes back as its exception."""
        routes = self.route_many(t.instruction for t in trajs)
        cues = self.cues_many((t.instruction, routes[t.instruction].category) for t in trajs)

        def one(t: Trajectory) -> Prepared | Exception:
            try:
                r = routes[t.instruction]
                rs = self.bank.lookup(r.category)
                c = cues[(t.instruction, r.category)]
                sel = select_context(t, r.category, self.config.max_images, *self._fp)
                prompt = fuse(self.prompts, self.bank, rs, t.instruction, compile_evidence(t), c.cues,
                              coarse=self.config.coarse, fine=self.config.fine)
                return Prepared(t, r, rs, c, sel, prompt)
            except Exception as exc:  # one bad trajectory must not sink the batch
                return exc

        if not self.config.dedupe_frames or len(trajs) == 1:
            return [one(t) for t in trajs]
        return list(self._workers().map(one, trajs))  # frame fingerprints decode images: use the cores

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="prep")
        return self._pool

    def verifier_request(self, p: Prepared) -> Request:
        """The engine request for one prepared trajectory."""
        return Request(prompt=p.prompt.text, images=p.images, suffix=p.prompt.suffix, watch=("0", "1"),
                       max_new_tokens=self.config.verify_max_new_tokens, kind="verify", tag=p.traj.id)

    # ------------------------------------------------------------------ scoring
    def _verdict(self, p: Prepared, out: Output) -> Verdict:
        if out.error:
            v = Verdict(status="error", error=f"{p.traj.source or '?'}, record {p.traj.id}: {out.error}")
        elif out.samples:
            v = vote([parse_verdict(t) for t, _ in out.samples], out.text)
        else:
            v = parse_verdict(out.text)
            v.p_success = p_success(out)
        v.id, v.category, v.cues = p.traj.id, p.route.category, list(p.cues.cues)
        v.route_parsed, v.dropped_cues = p.route.parsed, list(p.cues.dropped)
        v.n_images, v.prompt_tokens, v.completion_tokens = len(p.images), out.prompt_tokens, out.completion_tokens
        return v

    def _stamp(self, v: Verdict, t: Optional[Trajectory]) -> Verdict:
        v.model = getattr(self.engine, "name", None)
        v.bank_sha = self.bank.sha
        if t is not None:
            v.label, v.platform, v.task_id = t.label, t.platform, t.task_id
        return v

    def iter_score(self, trajs: Iterable[Trajectory]) -> Iterator[Verdict]:
        """Yield one Verdict per trajectory, batch by batch, in input order."""
        if self.engine is None:
            raise ValueError("scoring needs an engine")
        batch: list[Trajectory] = []
        for t in trajs:
            batch.append(t)
            if len(batch) >= self.config.batch_size:
                yield from self._score_batch(batch)
                batch = []
        if batch:
            yield from self._score_batch(batch)

    def _score_batch(self, batch: list[Trajectory]) -> list[Verdict]:
        t0 = time.perf_counter()
        prepared = self.prepare_many(batch)
        ok = [p for p in prepared if isinstance(p, Prepared)]
        outs = iter(self._call([self.verifier_request(p) for p in ok]))
        verdicts = []
        for t, p in zip(batch, prepared):
            if isinstance(p, Exception):
                v = Verdict(id=t.id, status="error", error=f"{t.source or '?'}, record {t.id}: {p}")
            else:
                v = self._verdict(p, next(outs))
            verdicts.append(self._stamp(v, t))
        self.stats["trajectories"] += len(batch)
        self.stats["seconds"] += time.perf_counter() - t0
        return verdicts

    def score(self, trajs: Iterable[Trajectory]) -> list[Verdict]:
        """Score every trajectory; one Verdict each, in input order."""
        return list(self.iter_score(trajs))

    def summary(self) -> dict:
        """Calls, tokens and seconds per trajectory so far."""
        n = max(1, self.stats["trajectories"])
        return {
            "trajectories": self.stats["trajectories"],
            "calls": self.stats["calls"],
            "calls_per_traj": self.stats["calls"] / n,
            "calls_by_kind": {k[6:]: v for k, v in self.stats.items() if k.startswith("calls_")},
            "tokens_per_traj": (self.stats["prompt_tokens"] + self.stats["completion_tokens"]) / n,
            "s_per_traj": self.stats["seconds"] / n,
            "route_unparsed": self.stats["route_unparsed"],
            "cue_unparsed": self.stats["cue_unparsed"],
        }


def p_success(out: Output) -> Optional[float]:
    """P(SCORE=1) at the final SCORE digit, normalised over {0, 1}; None if not reported."""
    offset = score_value_offset(out.text)
    if offset is None:
        return None
    for tp in out.token_probs:
        if tp.offset == offset:
            p0, p1 = tp.probs.get("0", 0.0), tp.probs.get("1", 0.0)
            return p1 / (p0 + p1) if p0 + p1 > 0 else None
    return None


def vote(verdicts: list[Verdict], raw: str) -> Verdict:
    """Majority vote over k sampled verdicts (ZeroGUI-style); ties and all-unparsed stay unparsed.
    `p_success` is the fraction of parsed samples that voted 1."""
    parsed = [v for v in verdicts if v.status == "ok"]
    ones = sum(v.score for v in parsed)
    zeros = len(parsed) - ones
    joined = "\n\n----- sample -----\n".join(v.raw or "" for v in verdicts) if verdicts else raw
    if not parsed or ones == zeros:
        why = "no sample was parseable" if not parsed else f"tied vote ({ones} vs {zeros})"
        return Verdict(status="unparsed", raw=joined, parse_error=why,
                       p_success=ones / len(parsed) if parsed else None)
    winner = 1 if ones > zeros else 0
    best = next(v for v in parsed if v.score == winner)
    best.p_success = ones / len(parsed)
    best.raw = joined
    return best
