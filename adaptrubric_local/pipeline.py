"""The AdaptRubric orchestrator: runs the stages for a list of trajectories, in batches: route and
cue (`criteria`, cached per instruction) -> bank lookup -> context selection -> evidence -> fusion ->
engine -> verdict. Every model call is counted, and its tokens charged to the trajectories that used
it (shared router and cue calls split evenly). A failure in one trajectory becomes a Verdict with
status "error". Only this module and `criteria` talk to the engine; knows nothing about tensors or
file formats.
"""
from __future__ import annotations

import itertools
import json
import os
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ._version import __version__
from .bank import RubricBank, RubricSet, load_bank
from .engine.base import Engine, Output, Request
from .prompts import PromptSet, load_prompts
from .stages.context import DEFAULT_BUDGET, Selection, select_context, thumbnail_fingerprint, thumbnails_close
from .stages.criteria import Criteria
from .stages.evidence import compile_evidence
from .stages.fusion import ABLATIONS, VerifierPrompt, fuse
from .types import CueResult, RouteResult, Trajectory, Verdict
from .verdict import parse_verdict, score_value_offset
from .votes import MAJORITY, VoteRule, vote

VERDICT_LAST_LINE = "MISSING_EVIDENCE:"  # generation may stop once this line is complete, outside the thinking
STAGES = {"route": "routing", "cue": "cues for", "verify": "verifying"}  # what `on_stage` is told, by request kind
UNITS = {"route": "instruction(s)", "cue": "instruction(s)", "verify": "trajectory(ies)"}


@dataclass
class PipelineConfig:
    """Settings of one AdaptRubric run; saved as JSON next to what it produced. The defaults are the
    paper's method; every setting that changes what the verifier sees is an opt-in."""

    router: str = field(default="model", metadata={"common": "method",
        "help": "model: the paper's router prompt (H.2), one call per distinct instruction; rules: keyword rules, no "
                "model call, less accurate (accuracy: docs/benchmarks.md)",
        "choices": ["model", "rules"]})
    coarse: bool = field(default=True, metadata={
        "help": "include the family rubric (Rc) and meta rule in the verifier prompt (--no-coarse: the ablation)"})
    fine: bool = field(default=True, metadata={"common": "method",
        "help": "generate and include fine cues (Rf) (--no-fine: the ablation)"})
    max_images: int = field(default=DEFAULT_BUDGET, metadata={"common": "method",
        "help": "screenshot budget M per trajectory (paper: 10; with --adapter: the adapter's)"})
    trajectories_per_batch: int = field(default=64, metadata={
        "help": "trajectories prepared and handed to the engine per call (the engine splits them into "
                "generate calls of at most --max-batch-size rows and overlaps their images); 64 is 4 x the "
                "engine's --max-batch-size of 16, the setting eval/bench_score.py measures; on the command line "
                "a --max-batch-size given without this flag sets it to 4 x that, at least 8"})
    dedupe_frames: bool = field(default=False, metadata={
        "help": "opt-in: skip near-duplicate frames when selecting screenshots (not in the paper)"})
    cue_filter: bool = field(default=False, metadata={
        "help": "opt-in: drop cues over 40 words or with over-constraining words the instruction does not use "
                "(the paper gives these as rules to the cue writer, not as a filter)"})
    route_max_new_tokens: int = field(default=16, metadata={"help": "token cap for router outputs"})
    cue_max_new_tokens: int = field(default=160, metadata={"help": "token cap for cue outputs"})
    verify_max_new_tokens: int = field(default=1024, metadata={
        "help": "token cap for verifier outputs; generation stops once the verdict block is complete"})
    fixed_category: str | None = field(default=None, metadata={
        "help": "skip routing: use this family for every trajectory", "metavar": "FAMILY"})
    manual_cues: list[str] | None = field(default=None, metadata={
        "help": "use this fine cue instead of generating cues (at most 2 kept)", "metavar": "TEXT"})
    bank_path: str | None = field(default=None, metadata={"common": "method",
        "help": "rubric bank YAML", "none": "the bundled paper bank", "metavar": "YAML"})
    vote_rule: str = field(default=MAJORITY, metadata={
        "help": "opt-in, with --votes k > 1 (k calls per trajectory): how the k sampled verdicts make the verdict: "
                "majority, all (SCORE 1 only when every vote says 1), any, or at-least-M; lines keep every vote",
        "metavar": "RULE"})

    def __post_init__(self):
        if self.router not in ("rules", "model"):
            raise ValueError(f"router must be 'rules' or 'model', got {self.router!r}")
        if self.max_images < 2:
            raise ValueError(f"max_images must be >= 2 (first and final frame), got {self.max_images}")
        if self.trajectories_per_batch < 1:
            raise ValueError(f"trajectories_per_batch must be >= 1, got {self.trajectories_per_batch}")
        for name in ("route_max_new_tokens", "cue_max_new_tokens", "verify_max_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        VoteRule(self.vote_rule)

    @property
    def ablation(self) -> str:
        """The Table 4 row these switches give."""
        return next(name for name, switches in ABLATIONS.items() if switches == (self.coarse, self.fine))

    def to_json(self, path: str | Path) -> None:
        """Write the config (and package version) as JSON."""
        Path(path).write_text(json.dumps({**asdict(self), "package_version": __version__}, indent=2) + "\n")


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

    def __init__(self, engine: Engine | None = None, config: PipelineConfig | None = None,
                 bank: RubricBank | None = None, prompts: PromptSet | None = None):
        self.engine = engine
        self.config = config or PipelineConfig()
        self.bank = bank or load_bank(self.config.bank_path)
        self.prompts = prompts or load_prompts()
        if self.config.fixed_category and self.config.fixed_category not in self.bank.family_names:
            raise ValueError(f"fixed_category must be one of the bank's families "
                             f"({', '.join(self.bank.family_names)}), got {self.config.fixed_category!r}")
        if engine is None and self.config.router == "model" and not self.config.fixed_category:
            raise ValueError("router='model' (the paper's default) needs an engine; use router='rules' to run "
                             "without a model")
        if self.config.vote_rule != MAJORITY:  # a rule over one greedy answer would be ignored
            votes = getattr(getattr(engine, "config", None), "votes", 1)
            if votes < 2:
                raise ValueError(f"vote_rule {self.config.vote_rule!r} needs votes > 1 (--votes k), got {votes}")
            VoteRule(self.config.vote_rule).threshold(votes)
        self.stats: Counter = Counter()
        # the criteria reach the engine through a weak reference: a bound self.call_engine would be a reference
        # cycle that keeps a dropped pipeline, and its engine's model on the GPU, alive until gc runs
        ref = weakref.ref(self)
        self.criteria = Criteria((lambda requests: ref().call_engine(requests)) if engine is not None else None,
                                 self.config, self.bank, self.prompts)
        self._pool: ThreadPoolExecutor | None = None
        self.on_stage: Callable[[str], None] | None = None  # told what runs now: routing, cues, verifying
        self._span: tuple[int, int] | None = None  # the batch being scored: its first and last position (1-based)

    @property
    def config(self) -> PipelineConfig:
        """The run's settings (replaceable between runs, e.g. for the ablation rows)."""
        return self._config

    @config.setter
    def config(self, cfg: PipelineConfig) -> None:
        self._config = cfg
        if hasattr(self, "criteria"):
            self.criteria.config = cfg

    # ------------------------------------------------------------------ engine accounting
    def call_engine(self, requests: list[Request]) -> list[Output]:
        """The engine's outputs for `requests`, counted, the stage named (what the criteria call)."""
        if not requests:
            return []
        self._stage(requests)
        outs = self.engine.generate(requests)
        for req, out in zip(requests, outs):
            self._count(req, out)
        return outs

    def _call_iter(self, requests: list[Request]) -> Iterator[list[tuple[int, Output]]]:
        """The engine's outputs in the lists they are ready in (counted as they come), the stage named."""
        if not requests:
            return
        self._stage(requests)
        for ready in self.engine.generate_iter(requests):
            for i, out in ready:
                self._count(requests[i], out)
            yield ready

    def _count(self, req: Request, out: Output) -> None:
        self.stats.update({f"calls_{req.kind}": 1, "calls": 1, "prompt_tokens": out.prompt_tokens,
                           "completion_tokens": out.completion_tokens})

    def _stage(self, requests: list[Request]) -> None:
        """Tell `on_stage` what a call does: "verifying trajectories 1-8", "routing 3 instruction(s) for
        trajectories 1-8" (the batch's positions in the run, whose total the caller knows)."""
        if self.on_stage is None:
            return
        kind, n = requests[0].kind, len(requests)
        what = f"{STAGES[kind]} {n} {UNITS[kind]}"
        if self._span is not None:
            first, last = self._span
            span = f"trajectories {first}-{last}" if last > first else f"trajectory {first}"
            if kind != "verify":
                what += f" for {span}"
            else:
                what = f"{STAGES[kind]} {span}" if n == last - first + 1 else f"{STAGES[kind]} {n} of {span}"
        self.on_stage(what)

    # ------------------------------------------------------------------ stages
    def route_many(self, instructions: Iterable[str]) -> dict[str, RouteResult]:
        """Route each distinct instruction once (cached across calls)."""
        return self.criteria.route_many(instructions)

    def cues_many(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], CueResult]:
        """Fine cues for each distinct (instruction, category), generated once (cached)."""
        return self.criteria.cues_many(pairs)

    def prepare(self, traj: Trajectory) -> Prepared:
        """Route, cue, select and fuse for one trajectory (uses the caches); raises on failure."""
        if isinstance(p := self.prepare_many([traj])[0], Exception):
            raise p
        return p

    def prepare_many(self, trajs: list[Trajectory]) -> list[Prepared | Exception]:
        """Prepare a batch; a trajectory that fails comes back as its exception."""
        routes = self.route_many(t.instruction for t in trajs)
        cues = self.cues_many((t.instruction, routes[t.instruction].category) for t in trajs)
        fp = (thumbnail_fingerprint, thumbnails_close) if self.config.dedupe_frames else (None, None)

        def one(t: Trajectory) -> Prepared | Exception:
            try:
                r = routes[t.instruction]
                rs = self.bank.lookup(r.category)
                c = cues[(t.instruction, r.category)]
                sel = select_context(t, r.category, self.config.max_images, *fp)
                prompt = fuse(self.prompts, self.bank, rs, t.instruction, compile_evidence(t), c.cues,
                              coarse=self.config.coarse, fine=self.config.fine)
                return Prepared(t, r, rs, c, sel, prompt)
            except Exception as exc:  # one bad trajectory must not sink the batch
                return exc

        if not self.config.dedupe_frames or len(trajs) == 1:
            return [one(t) for t in trajs]
        if self._pool is None:  # frame fingerprints decode images: use the cores
            self._pool = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="prep")
        return list(self._pool.map(one, trajs))

    def verifier_request(self, p: Prepared) -> Request:
        """The engine request for one prepared trajectory."""
        return Request(prompt=p.prompt.text, images=p.images, suffix=p.prompt.suffix, watch=("0", "1"),
                       max_new_tokens=self.config.verify_max_new_tokens, kind="verify", tag=p.traj.id,
                       stop_after_line=VERDICT_LAST_LINE)

    # ------------------------------------------------------------------ scoring
    def _verdict(self, t: Trajectory, share: tuple[float, float], p: Prepared | None = None,
                 out: Output | None = None, failed: Exception | None = None) -> Verdict:
        """The one place a trajectory's Verdict is built: the model's answer (`out`, parsed) or why there
        is none (`failed`: its preparation raised), what was decided for it (`p`), the run's stamp, its
        labels and its cost (its own call plus its `share` of the shared router and cue calls); counted."""
        if failed is not None or p is None or out is None:
            answer = Verdict(status="error", error=f"{t.source or '?'}, record {t.id}: {failed}")
            own, decided = (0.0, 0.0), {}
        else:
            answer = self._answer(p, out)
            own = (float(out.prompt_tokens + out.completion_tokens), 1.0)
            decided = dict(category=p.route.category, cues=list(p.cues.cues), route_parsed=p.route.parsed,
                           dropped_cues=list(p.cues.dropped), n_images=len(p.images), prompt_tokens=out.prompt_tokens,
                           completion_tokens=out.completion_tokens, hit_cap=out.hit_cap, hit_context=out.hit_context)
        v = replace(answer, id=t.id, model=self.engine.name if self.engine is not None else None,
                    bank_sha=self.bank.sha, label=t.label, platform=t.platform, task_id=t.task_id,
                    cost_tokens=own[0] + share[0], cost_calls=own[1] + share[1], **decided)
        self.stats.update(trajectories=1, errors=int(v.status == "error"), hit_cap=int(v.hit_cap),
                          hit_context=int(v.hit_context))
        return v

    def _answer(self, p: Prepared, out: Output) -> Verdict:
        """The verdict fields the model's output gives: parsed (sampled votes under the vote rule), with
        P(SCORE=1), or the engine's error."""
        if out.error:
            return Verdict(status="error", error=f"{p.traj.source or '?'}, record {p.traj.id}: {out.error}")
        if out.samples:
            opened = out.opened_thinking
            return vote([parse_verdict(t, opened) for t, _ in out.samples], out.text, VoteRule(self.config.vote_rule),
                        [_p_one(t, tps, opened) for t, tps in out.samples])
        v = parse_verdict(out.text, out.opened_thinking)
        # a probability belongs to a verdict: an unparsed output (an incomplete block, a key line after it)
        # has neither, so nothing downstream (calibration, ranking, a soft reward) reads one
        return replace(v, p_success=p_success(out)) if v.status == "ok" else v

    def iter_score(self, trajs: Iterable[Trajectory]) -> Iterator[Verdict]:
        """Yield one Verdict per trajectory as it is ready: batch by batch, and within a batch as the
        engine finishes each group (input order when it answers a batch at once)."""
        for ready in self.iter_ready(trajs):
            yield from ready

    def iter_ready(self, trajs: Iterable[Trajectory]) -> Iterator[list[Verdict]]:
        """`iter_score` in the lists the verdicts become ready in (a failed preparation, an engine group)."""
        return ([v for _, v in ready] for ready in self.iter_indexed(trajs))

    def iter_indexed(self, trajs: Iterable[Trajectory]) -> Iterator[list[tuple[int, Verdict]]]:
        """Lists of (input position, Verdict), as ready."""
        if self.engine is None:
            raise ValueError("scoring needs an engine")
        it, start = iter(trajs), 0
        try:
            while batch := list(itertools.islice(it, self.config.trajectories_per_batch)):
                self._span = (start + 1, start + len(batch))
                yield from ([(start + k, v) for k, v in ready] for ready in self._score_batch(batch))
                start += len(batch)
        finally:
            self._span = None

    def _score_batch(self, batch: list[Trajectory]) -> Iterator[list[tuple[int, Verdict]]]:
        """Lists of (position in the batch, Verdict): the failed preparations first, then the verifier's
        verdicts in the groups the engine hands them over in."""
        t0 = time.perf_counter()
        prepared = self.prepare_many(batch)
        shares = self._shared_costs(batch)
        failed = [(k, self._verdict(batch[k], shares[k], failed=p)) for k, p in enumerate(prepared)
                  if isinstance(p, Exception)]
        if failed:
            yield failed
        ok = [k for k, p in enumerate(prepared) if isinstance(p, Prepared)]
        for ready in self._call_iter([self.verifier_request(prepared[k]) for k in ok]):
            yield [(ok[j], self._verdict(batch[ok[j]], shares[ok[j]], prepared[ok[j]], o)) for j, o in ready]
        self.stats["seconds"] += time.perf_counter() - t0

    def _shared_costs(self, batch: list[Trajectory]) -> list[tuple[float, float]]:
        """Each trajectory's share (tokens, calls) of this batch's router and cue calls."""
        def keys(i: int) -> list[tuple]:
            ins = batch[i].instruction
            r = self.criteria.routes.get(ins)
            return [("route", ins)] + ([("cue", ins, r.category)] if r else [])

        return self.criteria.take_costs(keys, len(batch))

    def score(self, trajs: Iterable[Trajectory]) -> list[Verdict]:
        """Score every trajectory; one Verdict each, in input order."""
        return [v for _, v in sorted((kv for ready in self.iter_indexed(trajs) for kv in ready), key=lambda kv: kv[0])]

    def summary(self) -> dict:
        """Calls, tokens and seconds per trajectory so far (all model calls, amortised as in Table 5),
        over the trajectories that were not errors (those counted apart)."""
        stats, unparsed = self.stats, self.criteria.unparsed
        n = max(1, stats["trajectories"] - stats["errors"])
        out = {"trajectories": stats["trajectories"], "errors": stats["errors"], "calls": stats["calls"],
               "calls_per_traj": stats["calls"] / n,
               "calls_by_kind": {k[6:]: v for k, v in stats.items() if k.startswith("calls_")},
               "tokens_per_traj": (stats["prompt_tokens"] + stats["completion_tokens"]) / n,
               "s_per_traj": stats["seconds"] / n, "route_unparsed": unparsed["route"], "cue_unparsed": unparsed["cue"],
               "hit_cap": stats["hit_cap"], "hit_context": stats["hit_context"]}
        if self.engine is not None and self.engine.stats:
            out["engine"] = dict(self.engine.stats)
        return out


def p_success(out: Output) -> float | None:
    """P(SCORE=1) at the final SCORE digit of the answer, normalised over {0, 1}; None if not reported."""
    return _p_one(out.text, out.token_probs, out.opened_thinking)


def _p_one(text: str, token_probs, opened: bool) -> float | None:
    offset = score_value_offset(text, opened)
    at = None if offset is None else next((tp for tp in token_probs if tp.offset == offset), None)
    p0, p1 = (at.probs.get("0", 0.0), at.probs.get("1", 0.0)) if at is not None else (0.0, 0.0)
    return p1 / (p0 + p1) if p0 + p1 > 0 else None
