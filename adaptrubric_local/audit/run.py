"""Running an audit: build a data set's counterfactuals, write them as canonical data, state what
scoring them costs, score the originals and the counterfactuals through `scoring.score_with` (as
`adaptrubric score` does), then measure and report. A setting perturbation (`budget-halved`) gets
its own files, `counterfactuals.NAME.jsonl` and `verdicts.NAME.jsonl`, scored with its engine
options. With `resume=True` only the ids the verdict files lack are scored. Knows nothing about
argument parsing; of engines only how to make one like the run's with other options (`derived_engine`).
"""
from __future__ import annotations

import datetime
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from ..formats.stream import as_stream, stream_trajectories
from ..run_settings import IN_PROCESS, engine_record, vars_of
from ..scoring import score_with
from .perturbations import Perturbation
from .streamed import DATA_FILE, ChainedStream, CostCount, cf_stream, setting_file, write_streamed

VERDICTS = "verdicts.jsonl"


def plan_of(cost: CostCount, perturbations: list[Perturbation], cfg, engine_options: dict | None = None) -> dict:
    """What the audit costs, before any call: verifier calls (one per trajectory scored), router and cue
    calls (one per distinct instruction, shared by the counterfactuals that keep it), and the screenshots
    sent (the visual tokens, most of a call's tokens, scale with them), against scoring the data once."""
    def shared(ins: set) -> int:
        router = len(ins) if cfg.router == "model" and not cfg.fixed_category else 0
        return router + (len(ins) if cfg.fine and cfg.manual_cues is None else 0)

    n, extra = cost.n, sum(cost.applied.values())
    once = n + shared(cost.ins_originals)
    total = n + extra + shared(cost.ins_all)
    return {"trajectories": n, "counterfactuals": extra, "applied": dict(cost.applied),
            "score_calls": once, "audit_calls": total, "calls_ratio": total / max(1, once),
            "shared_calls": shared(cost.ins_all), "screenshots_originals": cost.shots_originals,
            "screenshots_counterfactuals": cost.shots_all - cost.shots_originals,
            "screenshots_ratio": cost.shots_all / max(1, cost.shots_originals),
            "settings": {p.name: p.engine_options(engine_options or {}) for p in perturbations if p.engine_options}}


def cost_text(plan: dict) -> str:
    """The cost plan as the command prints it up front."""
    per = ", ".join(f"{k} {v}" for k, v in plan["applied"].items())
    n = max(1, plan["trajectories"])
    return (f"audit cost: scoring the {plan['trajectories']} trajectories once is {plan['score_calls']} model calls "
            f"({plan['score_calls'] / n:.2f} per trajectory); the audit adds {plan['counterfactuals']} counterfactual "
            f"verifier calls ({per}): {plan['audit_calls']} calls in all ({plan['audit_calls'] / n:.2f} per "
            f"trajectory, {plan['calls_ratio']:.1f}x score's; router and cue calls are shared by the counterfactuals "
            f"that keep an instruction: {plan['shared_calls']}). Screenshots sent: {plan['screenshots_originals']} "
            f"for the originals + {plan['screenshots_counterfactuals']} for the counterfactuals "
            f"({plan['screenshots_ratio']:.1f}x); tokens grow about as the screenshots do")


def derived_engine(engine, changes: dict):
    """(an engine like `engine` with `changes` to its config, whether it shares `engine`'s weights), or
    (None, False) for an engine this cannot derive from (then the caller builds one). A transformers or
    vLLM engine shares the loaded weights (no second copy on the GPU); a remote one is a new client."""
    mods = sys.modules
    hf, vl, oa = (mods.get(f"adaptrubric_local.engine.{m}") for m in ("hf", "vllm_engine", "openai_engine"))
    try:
        if hf is not None and isinstance(engine, hf.HFEngine):
            return hf.HFEngine(replace(engine.config, **changes), loaded=(engine.model, engine.processor)), True
        if vl is not None and isinstance(engine, vl.VLLMEngine):
            return vl.VLLMEngine(replace(engine.config, **changes), llm=engine.llm), True
        if oa is not None and isinstance(engine, oa.OpenAIEngine):
            return oa.OpenAIEngine(replace(engine.config, **changes)), False
    except TypeError as exc:
        raise ValueError(f"cannot score with engine options {changes}: {exc}") from None
    return None, False


def _release(derived, original, shares: bool) -> None:
    """Close an engine made for a setting perturbation without closing what it shares with `original`."""
    if derived is original or derived is None:
        return
    if shares and hasattr(derived, "llm"):
        derived.llm = None  # vLLM's engine core belongs to the run's engine
    derived.close()


def _score(pipe, data, out: Path, loaded, desc: str, resume: bool, progress: bool, force: bool,
           extra: dict | None = None) -> dict:
    """`scoring.score_with` as `score_file` calls it (the same settings record), under its own progress name."""
    return score_with(pipe, {**vars_of(pipe), "runtime": dict(IN_PROCESS)}, data, out, resume=resume, loaded=loaded,
                      progress=progress, extra=extra, force_settings=force, desc=desc)


def run_audit(pipe, data: str | Path, out: str | Path, perturbations: list[Perturbation],
              loaded=None, resume: bool = False, progress: bool = True,
              image_roots: Iterable[str | Path] = (), engine_options: dict | None = None,
              build_engine: Callable[[dict], object] | None = None, force_settings: bool = False,
              log: Callable[[str], None] = print, review_limit: int | None = None) -> dict:
    """Audit the verifier `pipe` on `data` with `perturbations`, writing everything to `out`; returns
    the audit (what `audit.json` holds). The data is streamed (`loaded`: a LoadResult or a stream), so
    memory does not grow with it. `engine_options`: the run's (default: the engine's config), which a
    setting perturbation changes; `build_engine(options)` makes an engine for those when
    `derived_engine` cannot; `review_limit`: the originals review.html shows (review.LIMIT)."""
    from .report import write_report
    from .review import LIMIT, write_pairs_page

    out = Path(out)
    if not resume and (out / VERDICTS).is_file() and (out / VERDICTS).stat().st_size:
        raise ValueError(f"{out / VERDICTS} exists; pass --resume to continue that audit or choose another --out")
    stream = as_stream(loaded) if loaded is not None else stream_trajectories(data, image_roots=list(image_roots))
    files, cost, originals = write_streamed(out, perturbations, stream, pipe.config.max_images)
    base_options = dict(engine_options) if engine_options is not None else \
        engine_record(getattr(pipe.engine, "config", None)) or {}  # an engine's config fields, if it has one
    plan = plan_of(cost, perturbations, pipe.config, base_options)
    log(cost_text(plan))
    where = Path(data).resolve()  # the folder a data set's screenshots may lie in: itself, or a file's folder
    roots = [where if where.is_dir() else where.parent, *image_roots]
    both = ChainedStream([stream, cf_stream(out / DATA_FILE, roots)])
    summaries = {"verdicts": _score(pipe, data, out / VERDICTS, both, "auditing", resume, progress, force_settings)}
    for p in perturbations:
        if p.engine_options is not None:
            summaries[p.name] = _score_setting(pipe, p, data, out, files[p.name], roots, base_options, build_engine,
                                               resume, progress, force_settings)
    run = {"data": str(data), "out": str(out), "model": getattr(pipe.engine, "name", None),
           "adapter": base_options.get("adapter"), "max_visual_tokens": base_options.get("max_visual_tokens"),
           "router": pipe.config.router, "fine": pipe.config.fine, "coarse": pipe.config.coarse,
           "max_images": pipe.config.max_images, "image_roots": [str(r) for r in roots],
           "created": datetime.datetime.now().isoformat(timespec="seconds")}
    audit = write_report(out, perturbations, originals, run, plan, {k: str(v["out"]) for k, v in summaries.items()},
                           files, plan["settings"])
    write_pairs_page(out, audit, stream, files, roots, progress=progress,
                        limit=LIMIT if review_limit is None else review_limit)
    return audit


def _score_setting(pipe, p: Perturbation, data, out: Path, cf_file: Path, roots: list, base_options: dict,
                   build_engine, resume: bool, progress: bool, force: bool) -> dict:
    """Score a setting perturbation's file with an engine like the run's with its options."""
    changes = p.engine_options(base_options)
    engine, shares = derived_engine(pipe.engine, changes)
    if engine is None:
        if build_engine is None:
            raise ValueError(f"{p.name}: cannot make a {type(pipe.engine).__name__} with options {changes}")
        engine = build_engine({**base_options, **changes})
    original, pipe.engine = pipe.engine, engine
    try:
        return _score(pipe, data, setting_file(out, p.name), cf_stream(cf_file, roots), p.name, resume, progress,
                      force, {"perturbation": {"name": p.name, "engine_options": changes}})
    finally:
        pipe.engine = original
        _release(engine, original, shares)
