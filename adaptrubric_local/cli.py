"""The `adaptrubric` command line: argument parsing only; the work happens in the library.

Heavy modules (torch, transformers) are imported inside the subcommands that need them, so
`route`, `prompt` and `validate-bank` start fast.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

EXAMPLES = """examples:
  adaptrubric route "Turn on Wi-Fi, then open the dialer app"
  adaptrubric route --router rules --input tasks.jsonl --output routed.jsonl
  adaptrubric prompt data/trajs.jsonl --id traj-3 --cue "Check if the text is at the top of the note."
  adaptrubric prompt data/androidgen --id 1720533256 --no-fine --json
  adaptrubric validate-bank rubric_bank/default.yaml
  adaptrubric synth --out runs/synth
  adaptrubric make-tiny-model runs/tiny
  adaptrubric score runs/synth/trajectories.jsonl --model runs/tiny --out runs/verdicts.jsonl
  adaptrubric score DATA --model Qwen/Qwen3-VL-8B-Instruct --out verdicts.jsonl --resume
  adaptrubric eval --data DATA --verdicts verdicts.jsonl --out runs/eval
  adaptrubric ablate --data DATA --model runs/tiny --out runs/ablate
  adaptrubric tts --data DATA --verdicts verdicts.jsonl --out runs/tts
  adaptrubric compare runs/eval-a runs/eval-b
"""


def _die(msg: str, code: int = 2) -> int:
    print(f"adaptrubric: error: {msg}", file=sys.stderr)
    return code


# ----------------------------------------------------------------------------- route
def cmd_route(args) -> int:
    from .pipeline import AdaptRubric, PipelineConfig

    engine = None
    if args.router == "model":
        if not args.model:
            return _die("--router model needs --model (a hub id or a local folder)")
        engine = _make_engine(args)
    pipe = AdaptRubric(engine, PipelineConfig(router=args.router, fine=False, dedupe_frames=False))
    if args.instruction:
        res = pipe.route_many([args.instruction])[args.instruction]
        print(res.category)
        if not res.parsed:
            print(f"note: the router's output had no valid CATEGORY line; fell back to general. Output: "
                  f"{(res.raw or '')[:200]!r}", file=sys.stderr)
        return 0
    if not args.input:
        return _die("give an INSTRUCTION or --input FILE.jsonl")
    from .formats.base import LoadResult, iter_json_lines

    result = LoadResult()
    rows = [(rec, obj) for rec, obj in iter_json_lines(Path(args.input), result)]
    bad = 0
    for rec, obj in rows:
        if not isinstance(obj, dict) or not isinstance(obj.get("instruction"), str):
            print(f"{args.input}, record {rec}, field 'instruction': missing or not a string", file=sys.stderr)
            bad += 1
    good = [obj for _, obj in rows if isinstance(obj, dict) and isinstance(obj.get("instruction"), str)]
    routes = pipe.route_many(o["instruction"] for o in good)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    with out if args.output else contextlib.nullcontext(out):
        for obj in good:
            out.write(json.dumps({**obj, "category": routes[obj["instruction"]].category}, ensure_ascii=False) + "\n")
    for e in result.errors:
        print(e, file=sys.stderr)
    if args.output:
        print(f"routed {len(good)} instruction(s) -> {args.output}"
              + (f"; {bad + len(result.errors)} bad record(s) skipped" if bad or result.errors else ""),
              file=sys.stderr)
    return 0 if not (bad or result.errors) else 1


# ----------------------------------------------------------------------------- prompt
def cmd_prompt(args) -> int:
    from .formats import DataError, load_trajectories
    from .pipeline import AdaptRubric, PipelineConfig

    try:
        loaded = load_trajectories(args.data, fmt=args.format)
    except DataError as exc:
        return _die(str(exc))
    for w in loaded.warnings:
        print(f"warning: {w}", file=sys.stderr)
    traj = next((t for t in loaded.trajectories if t.id == args.id), None)
    if traj is None:
        err = next((e for e in loaded.errors if args.id in str(e)), None)
        known = ", ".join(t.id for t in loaded.trajectories[:10])
        return _die(str(err) if err else f"no trajectory with id {args.id!r} in {args.data} (ids: {known}...)")
    engine = _make_engine(args) if args.model else None
    cfg = PipelineConfig(router="model" if args.model else "rules", coarse=not args.no_coarse, fine=not args.no_fine,
                         max_images=args.max_images, manual_cues=args.cue if (args.cue or not args.model) else None,
                         bank_path=args.bank)
    pipe = AdaptRubric(engine, cfg)
    p = pipe.prepare(traj)
    if args.json:
        print(json.dumps({"prompt": p.prompt.full, "category": p.route.category, "images": p.images,
                          "cues": p.cues.cues, "dropped_cues": p.cues.dropped,
                          "selection_reasons": {str(k): v for k, v in p.selection.reasons.items()}},
                         ensure_ascii=False, indent=2))
        return 0
    print(p.prompt.text)
    print("\n[screenshots]")
    for i in p.selection.indices:
        print(f"  step {i + 1}: {traj.steps[i].screenshot}  ({p.selection.reasons[i]})")
    print()
    print(p.prompt.suffix)
    print(f"\n# category={p.route.category} ({p.route.mode} router{'' if p.route.parsed else ', unparsed: fell back'}) "
          f"cues={len(p.cues.cues)} images={len(p.images)} ablation={cfg.ablation} bank={pipe.bank.sha}",
          file=sys.stderr)
    for d in p.cues.dropped:
        print(f"# dropped cue: {d['cue']!r}: {d['reason']}", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------- validate-bank
def cmd_validate_bank(args) -> int:
    from .bank import load_bank
    from .schema import SchemaError

    try:
        bank = load_bank(args.path)
    except SchemaError as exc:
        print(exc, file=sys.stderr)
        return 1
    n_items = sum(len(rs.rubric_items) for rs in bank.families.values())
    print(f"{args.path}: OK ({len(bank.families)} families, {n_items} rubric items, sha {bank.sha})")
    return 0


# ----------------------------------------------------------------------------- engine helpers
def _make_engine(args):
    """The transformers engine from parsed --model/--adapter/... options (absent ones take defaults)."""
    from .engine.hf import HFEngine, HFEngineConfig

    opt = lambda name, default: getattr(args, name, default)  # noqa: E731
    visual = opt("max_visual_tokens", 6144)
    return HFEngine(HFEngineConfig(
        model=args.model, adapter=opt("adapter", None), load_in_4bit=opt("load_in_4bit", False),
        dtype=opt("dtype", "auto"), device_map=opt("device_map", "auto"), votes=opt("votes", 1),
        max_batch_size=opt("batch_size", 8), max_new_tokens=opt("max_new_tokens", 256),
        max_visual_tokens=visual or None, attn_implementation=opt("attn_implementation", None)))


def _add_model_args(p, required=False):
    p.add_argument("--model", required=required,
                   help="Qwen3-VL checkpoint: a hub id (e.g. Qwen/Qwen3-VL-4B-Instruct) or a local folder")
    p.add_argument("--adapter", help="LoRA adapter folder to apply (peft)")
    p.add_argument("--load-in-4bit", action="store_true", help="load the model in 4-bit (bitsandbytes nf4)")
    p.add_argument("--dtype", default="auto", choices=["auto", "bf16", "fp16", "fp32"], help="weights dtype")
    p.add_argument("--device-map", default="auto", help="transformers device_map (default auto)")
    p.add_argument("--votes", type=int, default=1, help="k samples per trajectory, majority vote (default 1: greedy)")
    p.add_argument("--attn-implementation", default=None,
                   help="sdpa | flash_attention_2 | sdpa_padded_prefill (default: flash_attention_2 on GPU when "
                        "installed, else sdpa; sdpa_padded_prefill on CPU)")


# ----------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="adaptrubric", description="AdaptRubric outcome rewards for GUI-agent "
                                 "trajectories, run in-process with Qwen3-VL.", epilog=EXAMPLES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    from . import __version__

    ap.add_argument("--version", action="version", version=f"adaptrubric-local {__version__}")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")

    p = sub.add_parser("route", help="route instructions to one of the 8 task families",
                       description="Print the family of one instruction, or add \"category\" to each line of a "
                                   "JSONL file.", epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("instruction", nargs="?", help="an instruction to route")
    p.add_argument("--router", choices=["rules", "model"], default="rules", help="rules (default, no model) or model")
    p.add_argument("--input", help="JSONL file whose lines have \"instruction\"")
    p.add_argument("--output", help="where to write the routed JSONL (default stdout)")
    _add_model_args(p)
    p.set_defaults(func=cmd_route)

    p = sub.add_parser("prompt", help="show exactly what the verifier would see for one trajectory",
                       description="Render the fused verifier prompt and the selected screenshots. Without --model "
                                   "no model is needed: the rules router picks the family and cues come only "
                                   "from --cue.", epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="trajectory file or folder (any supported format)")
    p.add_argument("--id", required=True, help="trajectory id")
    p.add_argument("--format", default="auto", help="input format (default auto)")
    p.add_argument("--no-coarse", action="store_true", help="leave out the family rubric (ablation)")
    p.add_argument("--no-fine", action="store_true", help="leave out the fine cues (ablation)")
    p.add_argument("--cue", action="append", default=[], help="a fine cue to include (repeatable, at most 2 kept)")
    p.add_argument("--max-images", type=int, default=10, help="screenshot budget (default 10)")
    p.add_argument("--bank", help="rubric bank YAML (default: bundled)")
    p.add_argument("--json", action="store_true", help="print {prompt, category, images} as JSON")
    _add_model_args(p)
    p.set_defaults(func=cmd_prompt)

    p = sub.add_parser("validate-bank", help="check a rubric bank YAML against the schema")
    p.add_argument("path", help="bank YAML file")
    p.set_defaults(func=cmd_validate_bank)

    from . import cli_score

    cli_score.add_subcommands(sub, _add_model_args, EXAMPLES)
    from . import cli_eval

    cli_eval.add_subcommands(sub, _add_model_args)
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if not getattr(args, "func", None):
        ap.print_help()
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return _die("interrupted", 130)
    except (ValueError, FileNotFoundError) as exc:
        return _die(str(exc))


if __name__ == "__main__":
    sys.exit(main())
