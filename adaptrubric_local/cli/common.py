"""Options shared by the `adaptrubric` subcommands: data, pipeline and engine flags, and the config
they describe. Every command that scores, shows a prompt or evaluates takes the same flags, so
`prompt` shows exactly what `score` sends. Parsing only; imports no model code.
"""
from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from types import SimpleNamespace

from ..distill.image_policy import adopt
from ..engine.build import EngineChoice
from ..engine.hf_config import HFEngineConfig
from ..engine.options import NO_VALUE, refuse_unread
from ..engine.remote import RemoteConfig, is_remote, remote_engine
from ..engine.vllm_engine import VLLMOptions
from ..evaluation.coverage import Coverage
from ..flags import add_config_arguments, common, config_kwargs, explicit, flag_name
from ..formats import FORMATS
from ..labelled_stream import apply_labels
from ..labels import LabelsConfig, not_loaded_warning
from ..pipeline import AdaptRubric, PipelineConfig
from ..registry import PLUGINS_FLAG, PLUGINS_HELP
from ..run_settings import planned_settings, precheck_out
from ..scoring import score_file, score_with
from ..stopping import Stopped

FORMATTER = argparse.RawDescriptionHelpFormatter


def add_command(sub, name: str, func=None, *, help: str, description: str | None = None,
                epilog: str | None = None):
    """The subcommand `name`, laid out as every command is, run by `func` (None: a command with steps)."""
    p = sub.add_parser(name, help=help, description=description, epilog=epilog, formatter_class=FORMATTER)
    if func is not None:
        p.set_defaults(func=func)
    return p


def die(msg: str, code: int = 2, prog: str = "adaptrubric") -> int:
    """Print one error line and return the exit code."""
    print(f"{prog}: error: {msg}", file=sys.stderr)
    return code


def add_data_argument(p, help: str = "trajectory file or folder (any supported format)", required: bool = True):
    """DATA, the data set a command reads, as its first positional argument."""
    p.add_argument("data", nargs=None if required else "?", metavar="DATA", help=help)


def add_out_option(p, help: str, required: bool = True) -> None:
    """--out, where a command writes its output (shown in the short --help)."""
    common(p.add_argument("--out", required=required, help=help), "output")


def refuse_given(args, cls, need: str) -> None:
    """A ValueError naming the flags of config `cls` given on the command line: they need `need`."""
    given = sorted(config_kwargs(args, cls, only_given=True))
    if given:
        raise ValueError(f"{', '.join(flag_name(g) for g in given)} need(s) {need}")


def add_data_options(p: argparse.ArgumentParser) -> None:
    """--format (the registered formats, a --plugins file's among them) and --image-root."""
    common(p.add_argument("--format", default="auto",
                          help=f"input format: auto or {', '.join(FORMATS)}, a loader's options after commas "
                               "(docs/data.md) (default auto)"), "data")
    common(p.add_argument("--image-root", action="append", default=[], metavar="DIR",
                          help="another folder screenshots may live in, for absolute paths outside the data "
                               "folder (repeatable)"), "data")


def add_labels_options(p: argparse.ArgumentParser, title: str = "labels (what the review page exports)") -> None:
    """--labels FILE (repeatable), one flag per LabelsConfig field, in the group `title`."""
    add_config_arguments(p.add_argument_group(title), LabelsConfig)


def data_options(args) -> dict:
    """--format and --image-root as the loaders take them (`fmt`, `image_roots`)."""
    return {"fmt": getattr(args, "format", "auto"), "image_roots": getattr(args, "image_root", None) or ()}


def labels_files(args) -> list:
    """The --labels files (a ValueError when they come without DATA)."""
    files = list(getattr(args, "labels", None) or [])
    if files and not args.data:
        raise ValueError("--labels needs DATA: a labels file labels the trajectories of a data set")
    return files


def load_labelled(args, check_images: bool = False):
    """(DATA with the --labels files applied, their record or None), for every command that reads labels."""
    from ..formats import load_trajectories

    data, files = args.data, labels_files(args)
    if not data:
        return None, None
    loaded = load_trajectories(data, check_images=check_images, **data_options(args))
    if loaded.errors:  # their trajectories get no label from the data (nor from --labels)
        n = len(loaded.errors) + len(loaded.trajectories)
        print(not_loaded_warning(len(loaded.errors), n, loaded.errors[0], data), file=sys.stderr)
    if not files:
        return loaded, None
    applied = apply_labels(loaded, files, data_name=str(data))
    print(applied.summary(), file=sys.stderr)
    return loaded, applied.record()


def add_plugins_option(p: argparse.ArgumentParser) -> None:
    """--plugins FILE.py|MODULE (repeatable). The command line imports them before it builds its parser
    (cli/__init__.py's `run`), so what they register is a choice of --engine, --format and --perturb;
    the value here is for --help."""
    p.add_argument(PLUGINS_FLAG, dest="plugins", action="append", default=[], metavar="FILE.py|MODULE",
                   help=PLUGINS_HELP)


# what `route` runs the model with: the router prompt is text only and its answer one line, so the
# image budget, batch sizes, votes and vLLM's tuning do not apply (vLLM runs with its defaults)
ROUTING_ENGINE_OPTIONS = ("model", "adapter", "dtype", "device_map", "attn_implementation", "load_in_4bit",
                          "load_in_8bit")
ROUTING_REMOTE_OPTIONS = ("openai_url", "openai_api_key_env", "openai_concurrency", "openai_timeout",
                          "openai_max_retries")


def add_model_options(p: argparse.ArgumentParser, serve: bool = False, routing: bool = False) -> None:
    """--engine, --model and every engine option: one flag per EngineChoice, HFEngineConfig and
    VLLMOptions field. `serve`: a flag not given leaves --config's value (no default shown), and the
    model defaults to the engine config's. `routing`: only what `route` uses (ROUTING_ENGINE_OPTIONS)."""
    g = p.add_argument_group("engine (transformers, Qwen3-VL; the options both engines share)")
    add_config_arguments(g, EngineChoice, hide_defaults=serve)
    add_config_arguments(g, HFEngineConfig, defaults={} if serve else {"model": None},  # a command names its model
                         hide_defaults=serve, only=ROUTING_ENGINE_OPTIONS if routing else None)
    if not routing:
        add_config_arguments(p.add_argument_group("engine (vLLM: with --engine vllm)"), VLLMOptions,
                             hide_defaults=serve)


def add_remote_options(p: argparse.ArgumentParser, routing: bool = False) -> None:
    """--openai-url and one flag per RemoteConfig field (`routing`: ROUTING_REMOTE_OPTIONS only)."""
    add_config_arguments(p.add_argument_group("remote verifier (an OpenAI-compatible server instead of the "
                                              "in-process model)"), RemoteConfig,
                         only=ROUTING_REMOTE_OPTIONS if routing else None)


def add_scoring_options(p: argparse.ArgumentParser) -> None:
    """Data, pipeline (PipelineConfig) and engine options, for every command that scores."""
    add_data_options(p)
    add_config_arguments(p.add_argument_group("AdaptRubric (defaults: the paper's method)"), PipelineConfig)
    add_model_options(p)
    add_remote_options(p)


def pipeline_config(args, **overrides):
    """The PipelineConfig the pipeline options describe (with --adapter, its screenshot budget)."""
    kw = {**config_kwargs(args, PipelineConfig), **overrides}
    given = explicit(args)
    if "trajectories_per_batch" not in given and "max_batch_size" in given and getattr(args, "max_batch_size", None):
        kw["trajectories_per_batch"] = max(4 * args.max_batch_size, 8)  # keeps the engine's batches full
    _, kw = adopt_adapter_images(args, {}, kw)
    return PipelineConfig(**kw)


def adopt_adapter_images(args, engine: dict, pipeline: dict) -> tuple[dict, dict]:
    """The --adapter's image settings (image_policy.json) where no flag set them (image_policy.py); each
    warning is said once per command (settings are read more than once)."""
    said = args.__dict__.setdefault("_warned", set())

    def warn(msg: str) -> None:
        if msg not in said:
            said.add(msg)
            print(f"warning: {msg}", file=sys.stderr)

    return adopt(getattr(args, "adapter", None), engine, pipeline, explicit(args), warn=warn)


def engine_options(args, cfg=None) -> dict:
    """HFEngineConfig options from the flags, plus VLLMOptions's with --engine vllm and RemoteConfig's
    with --openai-url; the token cap covers every call the pipeline makes, and vLLM's screenshot limit
    defaults to the pipeline's budget."""
    engine = getattr(args, "engine", None) or "transformers"
    check_engine_options(engine, explicit(args))
    kw, _ = adopt_adapter_images(args, config_kwargs(args, HFEngineConfig), {})
    if cfg is not None:
        kw["max_new_tokens"] = max(cfg.verify_max_new_tokens, cfg.cue_max_new_tokens, cfg.route_max_new_tokens)
    if engine == "vllm":
        if getattr(args, "openai_url", None):
            raise ValueError("--engine vllm runs vLLM in this process; --openai-url sends every call to a server: "
                             "choose one")
        kw.update(config_kwargs(args, VLLMOptions), engine="vllm")
        if kw.get("limit_mm_per_prompt") is None and cfg is not None:
            kw["limit_mm_per_prompt"] = cfg.max_images
    elif engine != "transformers":  # a registered engine: build_engine passes it the options it reads
        kw["engine"] = engine
    if getattr(args, "openai_url", None):
        kw.update(config_kwargs(args, RemoteConfig))
    return kw


def spell(name: str, value=NO_VALUE) -> str:
    """An option of engine/options.py's advice as a command line writes it: its flag (and value)."""
    if value is NO_VALUE or value is True:
        return flag_name(name)
    return f"{flag_name(name)} {shlex.quote(str(value))}"


def check_engine_options(engine: str, given) -> None:
    """Refuse a given option `engine` does not read, naming what to use instead (engine/options.py; exit 2)."""
    refuse_unread(engine, given, spell)


def make_engine(args, cfg=None):
    """The engine the flags describe (`engine_from_options` of `engine_options`)."""
    return engine_from_options(engine_options(args, cfg))


def engine_from_options(options: dict):
    """The engine of a flat mapping of engine options: a server's with `openai_url`, else the in-process one."""
    if is_remote(options):
        return remote_engine(options)
    from ..engine.build import build_engine  # looked up at each call (tests replace it)

    return build_engine(**options)


def needs_engine(cfg) -> bool:
    """Whether a pipeline config calls the model before the verifier (router or cues)."""
    return (cfg.router == "model" and not cfg.fixed_category) or (cfg.fine and cfg.manual_cues is None)


def checked_settings(args, cfg, out, resume: bool, extra: dict | None = None, **score_kw) -> dict | None:
    """The settings record of an in-process run, from its configs (as Ray's is), with `out` checked
    against it before the model loads (`precheck_out`); None with a server, whose engine asks it."""
    options = engine_options(args, cfg)
    if is_remote(options):
        return None
    settings, shard = planned_settings(cfg, options), score_kw.get("shard")
    extra = {**(extra or {}), **({"shard": str(shard)} if shard else {})}
    precheck_out(out, settings, args.data, resume=resume, force=score_kw.get("force_settings", False),
                 calibration=score_kw.get("calibration"), extra=extra)
    return settings


def score_with_model(args, out, cfg, resume: bool = False, loaded=None, **score_kw) -> dict:
    """Load args.data (unless `loaded`) and, with `resume`, check the verdict file's settings (both failing
    before the model loads), build the engine, score into `out`."""
    from ..formats import load_trajectories

    if loaded is None:
        loaded = load_trajectories(args.data, **data_options(args))
    settings = checked_settings(args, cfg, out, resume, **score_kw)
    kw = dict(resume=resume, fmt=args.format, loaded=loaded, **score_kw)
    try:
        engine = make_engine(args, cfg)
    except Stopped as stop:  # stopped while the model loads: the summary says nothing was scored, all is left
        if settings is not None:
            score_with(_not_started(stop), settings, args.data, out, progress=False, **kw)
        raise
    with contextlib.closing(engine):
        pipe = AdaptRubric(engine, cfg)
        if settings is None:
            return score_file(pipe, args.data, out, progress=not args.quiet, **kw)
        return score_with(pipe, settings, args.data, out, progress=not args.quiet, **kw)


def _not_started(stop: BaseException):
    """A scorer that raises `stop`, so `score_with` writes the summary of a run that scored nothing."""
    def iter_score(trajs):
        raise stop
        yield  # a generator, as a scorer's iter_score is

    return SimpleNamespace(iter_score=iter_score, summary=dict)


def add_coverage_options(p: argparse.ArgumentParser, subset: bool = True) -> None:
    """--labels, then --subset and --allow-extra: what `eval`, `tts` and `review` do when the verdicts and
    DATA differ (evaluation/coverage.py); no --subset with `subset` False (`calibrate`)."""
    add_labels_options(p)
    if subset:
        p.add_argument("--subset", choices=["data", "verdicts"], default="data",
                       help="data: every trajectory of DATA, those without a verdict counted as missing (a "
                            "predicted failure, the paper's fixed denominators); verdicts: only the trajectories the "
                            "verdicts cover (said in the report) (default data)")
    p.add_argument("--allow-extra", action="store_true",
                   help="leave out, with a warning, verdicts whose ids are not in DATA (otherwise an error)")


def print_coverage(result: dict) -> None:
    """What the verdicts of `result` (metrics.json, tts.json) cover of DATA, on stderr: a WARNING or a note."""
    if not result.get("coverage"):
        return
    run = result.get("run", {})
    for loud, text in Coverage(**result["coverage"]).messages(run.get("data"), run.get("verdicts")):
        print(f"{'WARNING' if loud else 'note'}: {text}", file=sys.stderr)
