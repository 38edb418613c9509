#!/usr/bin/env python3
"""The engine's memory model (engine/memory.py) against the measured peak of one prefill, on the CPU.

Builds Qwen3-VL-4B or 8B at full width and reduced depth with random bf16 weights (the published
hidden size, heads, head_dim 128, intermediate size, the 151,936-row vocabulary and the vision tower's
width; 4 language layers, 3 vision blocks each feeding a deepstack merger, so every kind of tensor the
full model allocates is there), then runs one `HFEngine.generate` call with one new token (vision tower,
merge, prefill) on a batch of 2 left-padded rows of phone-like frames (576 visual tokens each) and text:
the longer row at the stated length, the other at half of it. Each measurement is a fresh process.

How the peak is measured: glibc is told to serve every block over 64 KiB by mmap
(`MALLOC_MMAP_THRESHOLD_=65536`), so a freed tensor leaves the resident set at once, and the kernel's
high-water mark of resident memory (`VmHWM`, reset through `/proc/self/clear_refs` just before the call)
is then the peak of what the call held: peak minus the resident size before the call is the measured
figure. The same mark, reset when the last language layer's attention starts and read when it ends,
gives the attention phase on its own (where the L x L mask, its copy and repeated K/V live; at these
lengths the MLP is the overall peak). torch's CPU allocator keeps no statistics; as a second opinion
`--track` also counts every tensor storage the call creates through a TorchDispatchMode (freed when the
last tensor using it dies), by phase; it misses what a kernel allocates inside itself (SDPA's
query-dtype copy of a boolean mask on the CPU is one: the resident-memory figure includes it). The
estimate is `engine.memory.estimate` for the same shapes (the prompt and visual tokens the engine
reports), device "cpu": the CUDA-only terms
(masked_scatter's prefix sum, the memory-efficient kernel's mask padding) are left out, and K/V are
repeated per head on the `sdpa` path as on CUDA (`TRANSFORMERS_SDPA_FORCE_GQA=0`).

    python eval/prefill_memory.py                       # 4B and 8B, 2K and 4K tokens, both paths (~20 min)
    python eval/prefill_memory.py --models 4B --lengths 8192 --attn sdpa --track
    python eval/prefill_memory.py --ci                  # small and fast (CI): 4B width, 2 layers, 1K tokens
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = {"4B": "Qwen/Qwen3-VL-4B-Instruct", "8B": "Qwen/Qwen3-VL-8B-Instruct"}
FRAME = 768  # 768 x 768 pixels: 576 visual tokens a frame
GiB = 1024 ** 3
TOLERANCE = 0.15
CI_TOLERANCE = 0.25  # the CI size is small enough that the interpreter's own noise counts


# ---------------------------------------------------------------------------------------------- child
def _status(key: str) -> int:
    import re

    with open("/proc/self/status") as fh:
        return int(re.search(rf"{key}:\s+(\d+)", fh.read()).group(1)) * 1024


def reduced(name: str, layers: int, vision_depth: int = 3) -> dict:
    """The published architecture at `layers` language layers and `vision_depth` vision blocks, each
    vision block feeding one of the deepstack mergers (as many as the full model has)."""
    from adaptrubric_local.engine.architectures import ARCHITECTURES

    arch = {k: dict(v) if isinstance(v, dict) else v for k, v in ARCHITECTURES[name].items()}
    n_ds = len(arch["vision"]["deepstack_visual_indexes"])
    depth = max(vision_depth, n_ds)
    arch["text"]["num_hidden_layers"] = layers
    arch["vision"].update(depth=depth, deepstack_visual_indexes=list(range(depth - n_ds, depth)))
    return arch


class Tracker:
    """Live bytes of the tensor storages created under it (a TorchDispatchMode), and their peak."""

    def __init__(self):
        import weakref

        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self
        self.live = self.peak = 0
        self.refs: dict = {}
        self.phase = "before"
        self.phases: dict = {}

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in (out if isinstance(out, (tuple, list)) else [out]):
                    tracker.add(t, weakref)
                tracker.peak = max(tracker.peak, tracker.live)
                tracker.phases[tracker.phase] = max(tracker.phases.get(tracker.phase, 0), tracker.live)
                return out

        self.mode = Mode()

    def watch(self, model) -> list:
        """Hooks naming the phase: the vision tower, the merge before the language model, the last layer's
        attention and MLP (engine.memory's phases)."""
        layer = model.model.language_model.layers[-1]
        spans = [(model.model.visual, "vision", "merge"), (model.model.language_model, "language", "decode"),
                 (layer.self_attn, "attention", "language"), (layer.mlp, "mlp", "language")]
        hooks = []
        for module, inside, after in spans:
            def pre(mod, args, kwargs, name=inside):
                if name != "language" or self.phase == "merge":  # decode steps stay "decode"
                    self.phase = name
            hooks.append(module.register_forward_pre_hook(pre, with_kwargs=True))
            hooks.append(module.register_forward_hook(lambda mod, a, o, name=after: setattr(self, "phase", name)))
        return hooks

    def add(self, t, weakref) -> None:
        import torch

        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            return
        try:
            st = t.untyped_storage()
            ptr, n = st.data_ptr(), st.nbytes()
        except (RuntimeError, NotImplementedError):
            return
        if not ptr:
            return
        if ptr not in self.refs:
            self.refs[ptr] = [n, 0]
            self.live += n
        self.refs[ptr][1] += 1
        weakref.finalize(t, self._drop, ptr)

    def _drop(self, ptr) -> None:
        entry = self.refs[ptr]
        entry[1] -= 1
        if entry[1] == 0:
            self.live -= entry[0]
            del self.refs[ptr]


def child(args) -> dict:
    """One measurement in this process: build, warm up, one generate call, the peak over its start."""
    import gc

    import torch
    from PIL import Image, ImageDraw
    from transformers import GenerationConfig, Qwen3VLForConditionalGeneration

    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.architectures import QWEN_TOKEN_IDS, qwen3vl_config
    from adaptrubric_local.engine.attention import register
    from adaptrubric_local.engine.base import Request
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig
    from adaptrubric_local.engine.openai_engine import QWEN3VL_MAX_PIXELS, QWEN3VL_MIN_PIXELS
    from adaptrubric_local.engine.tiny import build_processor, build_tokenizer

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    tok = build_tokenizer(tokenizer_corpus())
    ids = {t: tok.convert_tokens_to_ids(t) for t in QWEN_TOKEN_IDS}
    cfg = qwen3vl_config(reduced(MODELS[args.model], args.layers), token_ids=ids)
    attn = register() if args.attn == "sdpa_padded_prefill" else args.attn
    torch.manual_seed(0)
    model = Qwen3VLForConditionalGeneration._from_config(cfg, dtype=torch.bfloat16, attn_implementation=attn).eval()
    model.generation_config = GenerationConfig(eos_token_id=None, pad_token_id=ids["<|endoftext|>"], do_sample=False)
    processor = build_processor(tok, max_pixels=QWEN3VL_MAX_PIXELS, min_pixels=QWEN3VL_MIN_PIXELS)
    engine = HFEngine(HFEngineConfig(model=f"random-{args.model}", max_new_tokens=1, max_batch_size=2,
                                     image_workers=1), loaded=(model, processor))
    engine.eos_ids = []
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)

    def frame(k: int) -> str:
        path = work / f"frame_{k}.png"
        if not path.is_file():
            im = Image.new("RGB", (FRAME, FRAME), (240, 240, 240))
            d = ImageDraw.Draw(im)
            for r in range(8):
                d.rectangle([20, 30 + 90 * r, FRAME - 20, 100 + 90 * r], fill=((k * 53 + r * 29) % 255, 160, 200))
            im.save(path)
        return str(path)

    per_frame = (FRAME // 32) ** 2

    def request(length: int, first: int) -> Request:
        n = max(1, round(0.85 * length / per_frame))
        images = [frame(first + j) for j in range(n)]
        text_tokens = max(8, length - n * per_frame)
        prompt = "Judge whether the agent did it. " + "the screen shows a list of items " * (text_tokens // 7 + 1)
        toks = engine.encoder.prompt_ids([Request(prompt=prompt, images=images)], [[per_frame] * n])[0]
        words = prompt.split(" ")  # trim to the length: one word is about one token here
        while len(toks) > length and len(words) > 8:
            words = words[: max(8, len(words) - max(1, (len(toks) - length) // 2))]
            prompt = " ".join(words)
            toks = engine.encoder.prompt_ids([Request(prompt=prompt, images=images)], [[per_frame] * n])[0]
        return Request(prompt=prompt, images=images, max_new_tokens=1)

    reqs = [request(args.length, 0), request(args.length // 2, 100)]
    marks: dict = {}
    layer = model.model.language_model.layers[-1]

    def attn_start(mod, a, kw):
        x = kw.get("hidden_states", a[0] if a else None)
        if x is not None and x.shape[1] > 1 and "armed" not in marks:
            marks["before_attention"] = _status("VmHWM")  # the peak so far
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            marks["armed"] = True

    def attn_end(mod, a, out):
        if marks.get("armed") and "attention" not in marks:
            marks["attention"] = _status("VmHWM")

    engine.generate([Request(prompt="warm up", images=[frame(999)], max_new_tokens=1)])  # lazy set-up outside
    attn_hooks = [layer.self_attn.register_forward_pre_hook(attn_start, with_kwargs=True),
                  layer.self_attn.register_forward_hook(attn_end)]
    gc.collect()
    tracker = Tracker() if args.track else None
    hooks = tracker.watch(model) if tracker else []
    before = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset VmHWM to the current resident size
    t0 = time.perf_counter()
    if tracker:
        with tracker.mode:
            outs = engine.generate(reqs)
    else:
        outs = engine.generate(reqs)
    seconds = time.perf_counter() - t0
    peak = max(_status("VmHWM"), marks.get("before_attention", 0))
    for hk in hooks + attn_hooks:
        hk.remove()
    errors = [o.error for o in outs if o.error]
    if errors:
        raise RuntimeError(errors[0])
    return {"model": args.model, "attn": args.attn, "layers": args.layers, "rows": [o.prompt_tokens for o in outs],
            "visual": [o.visual_tokens for o in outs], "rss_before": before, "hwm": peak,
            "measured": peak - before, "measured_attention": marks.get("attention", before) - before,
            "tracked": tracker.peak if tracker else None,
            "tracked_phases": tracker.phases if tracker else {}, "seconds": seconds}


# ---------------------------------------------------------------------------------------------- parent
def measure(model: str, length: int, attn: str, layers: int, track: bool, work: Path) -> dict:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0",
               TRANSFORMERS_SDPA_FORCE_GQA="0", TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, __file__, "--child", "--models", model, "--lengths", str(length), "--attn", attn,
           "--layers", str(layers), "--work", str(work)] + (["--track"] if track else [])
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{model} {length} {attn}: {p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def estimate_for(res: dict):
    from transformers import Qwen3VLConfig  # noqa: F401 (the config class builds below)

    from adaptrubric_local.engine.architectures import qwen3vl_config
    from adaptrubric_local.engine.memory import Group, Sizes, estimate

    os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] = "0"  # as in the child: K/V repeated on the sdpa path
    sizes = Sizes.of(qwen3vl_config(reduced(MODELS[res["model"]], res["layers"])))
    return estimate(sizes, Group(res["rows"], res["visual"], new_tokens=1), res["attn"], b=2, device="cpu")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="4B,8B", help="4B, 8B or both (default 4B,8B)")
    ap.add_argument("--lengths", default="2048,4096", help="longer row's tokens (default 2048,4096)")
    ap.add_argument("--attn", default="sdpa,sdpa_padded_prefill", help="attention implementations to measure")
    ap.add_argument("--layers", type=int, default=4, help="language-model layers (default 4)")
    ap.add_argument("--track", action="store_true", help="also count tensor storages (TorchDispatchMode)")
    ap.add_argument("--ci", action="store_true", help="small and fast: 4B width, 2 layers, 1,024 tokens, sdpa")
    ap.add_argument("--work", default=None, help="folder for the generated frames (default: a temporary one)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        args.model, args.length = args.models, int(args.lengths)
        print(json.dumps(child(args)))
        return 0
    if args.ci:
        args.models, args.lengths, args.attn, args.layers = "4B", "1024", "sdpa", 2
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _machine import machine

    work = Path(args.work or tempfile.mkdtemp(prefix="prefill_memory_"))
    print(machine())
    print(f"{'model':<5} {'attn':<20} {'rows (visual)':<26} {'measured GiB':>12} {'estimate GiB':>12} "
          f"{'ratio':>6}  peak phase   {'tracked':>8}  s")
    worst = 0.0
    for model in args.models.split(","):
        for length in (int(x) for x in args.lengths.split(",")):
            for attn in args.attn.split(","):
                res = measure(model, length, attn, args.layers, args.track, work)
                est = estimate_for(res)
                ratio = res["measured"] / est.total
                worst = max(worst, abs(ratio - 1))
                rows = ", ".join(f"{r} ({v})" for r, v in zip(res["rows"], res["visual"]))
                tracked = f"{res['tracked'] / GiB:8.3f}" if res["tracked"] else "       -"
                print(f"{model:<5} {attn:<20} {rows:<26} {res['measured'] / GiB:12.3f} {est.total / GiB:12.3f} "
                      f"{ratio:6.2f}  {est.peak_phase:<11} {tracked}  {res['seconds']:.0f}", flush=True)
                att = sum(est.phases["attention"].values())
                worst = max(worst, abs(res["measured_attention"] / att - 1))
                print(f"      last layer's attention, resident memory: measured {res['measured_attention'] / GiB:.3f}, "
                      f"estimate {att / GiB:.3f} GiB, ratio {res['measured_attention'] / att:.2f}", flush=True)
                if res["tracked_phases"]:
                    print("      by phase, tracked/estimate GiB: " + ", ".join(
                        f"{p} {res['tracked_phases'].get(p, 0) / GiB:.3f}/{sum(t.values()) / GiB:.3f}"
                        for p, t in est.phases.items()), flush=True)
    limit = CI_TOLERANCE if args.ci else TOLERANCE
    print(f"largest |measured/estimate - 1|, peaks and attention phases = {worst:.3f} (target <= {limit})")
    return 0 if worst <= limit else 1


if __name__ == "__main__":
    sys.exit(main())
