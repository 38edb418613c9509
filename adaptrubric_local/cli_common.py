"""Options shared by the `adaptrubric` subcommands: data, pipeline and engine flags, and the config
they describe. Every command that scores, shows a prompt or evaluates takes the same flags, so
`prompt` shows exactly what `score` sends. Parsing only; imports no model code.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

from .engine.build import add_engine_arguments, engine_kwargs
from .engine.remote import RemoteConfig, is_remote, remote_engine
from .flags import Record, add_config_arguments, config_kwargs, explicit

FORMATTER = argparse.RawDescriptionHelpFormatter


def die(msg: str, code: int = 2) -> int:
    """Print one error line and return the exit code."""
    print(f"adaptrubric: error: {msg}", file=sys.stderr)
    return code


def rules_estimate() -> str:
    """The rules router's measured generalisation, for help texts."""
    from . import route

    return getattr(route, "RULES_ESTIMATE", "").replace("%", "%%")  # argparse formats help with %


def add_data_options(p: argparse.ArgumentParser) -> None:
    """--format and --image-root."""
    p.add_argument("--format", default="auto",
                   help="input format: auto, canonical, androidgen, zerogui, osreward, clawgui (default auto)")
    p.add_argument("--image-root", action="append", default=[], metavar="DIR",
                   help="a folder screenshots may also live in (repeatable); the data folder is always allowed. "
                        "Needed when records hold absolute paths outside the data folder")


def add_pipeline_options(p: argparse.ArgumentParser) -> None:
    """The AdaptRubric settings; defaults are the paper's method."""
    g = p.add_argument_group("AdaptRubric (defaults: the paper's method)")
    g.add_argument("--router", choices=["model", "rules"], default="model",
                   help="model: the paper's router prompt (H.2), one call per distinct instruction (default); "
                        "rules: no model call. " + rules_estimate())
    g.add_argument("--no-coarse", action="store_true", help="ablation: leave out the family rubric and meta rule")
    g.add_argument("--no-fine", action="store_true", help="ablation: leave out the fine cues")
    g.add_argument("--cue", action="append", default=None, metavar="TEXT",
                   help="use this fine cue instead of generating cues (repeatable, at most 2 kept)")
    g.add_argument("--max-images", type=int, default=10, action=Record,
                   help="screenshot budget per trajectory (paper: 10; with --adapter: the adapter's)")
    g.add_argument("--max-new-tokens", type=int, default=1024,
                   help="cap on verifier output tokens (default 1024; generation stops once the verdict block "
                        "is complete, so a long cap costs nothing when the model is brief)")
    g.add_argument("--dedupe-frames", action="store_true",
                   help="opt-in: treat near-identical neighbouring frames as one screen and fill the screenshot "
                        "budget with distinct screens (not in the paper; changes what the verifier sees; decodes "
                        "the candidate frames to compare them)")
    g.add_argument("--cue-filter", action="store_true",
                   help="opt-in: drop generated cues over 40 words or with over-constraining words (exactly, all, "
                        "visibly, ...) the instruction does not use (the paper states these as rules for the cue "
                        "writer, not as a filter)")
    g.add_argument("--bank", help="rubric bank YAML (default: the bundled paper bank)")


def add_model_options(p: argparse.ArgumentParser, required: bool = False) -> None:
    """--model and every engine option."""
    add_engine_arguments(p, required=required)


def add_remote_options(p: argparse.ArgumentParser) -> None:
    """--openai-url and how to call that server (engine/remote.py's RemoteConfig)."""
    g = p.add_argument_group("remote verifier (an OpenAI-compatible server instead of the in-process model)")
    url = next(f for f in dataclasses.fields(RemoteConfig) if f.name == "openai_url")
    g.add_argument("--openai-url", dest="openai_url", metavar="URL", action=Record, help=url.metadata["help"])
    add_config_arguments(g, RemoteConfig, skip={"openai_url"})  # one flag per field, named after it


def add_scoring_options(p: argparse.ArgumentParser, model_required: bool = False) -> None:
    """Data, pipeline and engine options, for every command that scores."""
    add_data_options(p)
    add_pipeline_options(p)
    add_model_options(p, required=model_required)
    add_remote_options(p)


def pipeline_config(args, **overrides):
    """The PipelineConfig the pipeline options describe."""
    from .pipeline import PipelineConfig

    kw = dict(router=args.router, coarse=not args.no_coarse, fine=not args.no_fine, max_images=args.max_images,
              bank_path=args.bank, verify_max_new_tokens=args.max_new_tokens, dedupe_frames=args.dedupe_frames,
              cue_filter=args.cue_filter, manual_cues=args.cue,
              batch_size=max(4 * getattr(args, "max_batch_size", 8), 8))
    kw.update(overrides)
    _, kw = adopt_adapter_images(args, {}, kw)
    return PipelineConfig(**kw)


def adopt_adapter_images(args, engine: dict, pipeline: dict) -> tuple[dict, dict]:
    """The --adapter's image settings (image_policy.json) where no flag set them (image_policy.py)."""
    from .image_policy import adopt

    return adopt(getattr(args, "adapter", None), engine, pipeline, explicit(args), warn=_warn_once(args))


def _warn_once(args):
    """A warning printer that says each thing once per command (settings are read more than once)."""
    said = args.__dict__.setdefault("_warned", set())

    def warn(msg: str) -> None:
        if msg not in said:
            said.add(msg)
            print(f"warning: {msg}", file=sys.stderr)

    return warn


def engine_options(args, cfg=None) -> dict:
    """HFEngineConfig options from the flags, plus RemoteConfig's with --openai-url; the token cap
    covers every call the pipeline makes."""
    kw, _ = adopt_adapter_images(args, engine_kwargs(args), {})
    if cfg is not None:
        kw["max_new_tokens"] = max(cfg.verify_max_new_tokens, cfg.cue_max_new_tokens, cfg.route_max_new_tokens)
    if getattr(args, "openai_url", None):
        if getattr(args, "workers", 1) > 1:
            raise ValueError("--workers starts local model copies; with --openai-url the server scales: raise "
                             "--openai-concurrency (requests in flight) instead")
        kw.update(config_kwargs(args, RemoteConfig))
    return kw


def make_engine(args, cfg=None):
    """The engine the options describe: the server's with --openai-url, else the transformers engine."""
    kw = engine_options(args, cfg)
    if is_remote(kw):
        return remote_engine(kw)
    from .engine.build import build_engine

    return build_engine(**kw)


def needs_engine(cfg) -> bool:
    """Whether a pipeline config calls the model before the verifier (router or cues)."""
    return (cfg.router == "model" and not cfg.fixed_category) or (cfg.fine and cfg.manual_cues is None)


def score_with_model(args, out, cfg, resume: bool = False, **score_kw) -> dict:
    """Load args.data (failing before the model loads), build the engine, score into `out`."""
    from .formats import load_trajectories
    from .pipeline import AdaptRubric
    from .scoring import score_file

    loaded = load_trajectories(args.data, fmt=args.format, image_roots=args.image_root)
    engine = make_engine(args, cfg)
    try:
        return score_file(AdaptRubric(engine, cfg), args.data, out, resume=resume, fmt=args.format,
                          progress=not args.quiet, loaded=loaded, **score_kw)
    finally:
        engine.close()
