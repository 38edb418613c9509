#!/usr/bin/env python3
"""GPU benchmark: what `adaptrubric score` runs, against the plain transformers script a user would write.

Builds the Qwen3-VL-8B architecture (published configuration) with random bf16 weights on the GPU
(no download), with a small offline tokenizer and Qwen3-VL's real image settings. Data: at least 32
synthetic trajectories of 6-16 real-size 1080x2400 screenshots (varied lengths; the pipeline selects
up to 10 per trajectory). For each setting it runs, side by side on the same model object:
- engine: the package's pipeline (routing, cues, selection, fusion, verifier) through `HFEngine`;
- reference: every request the engine received, replayed as a user would script it: processor
  (chat template + images at the same resolution) and `model.generate`, in batches of at most the
  engine's batch size, in arrival order, under the same out-of-memory rules as the engine: a failed
  batch is halved, and the padded-token budget (the engine's own `TokenBudget`, started where the
  engine's starts, costs by the engine's estimate) drops to what fitted and grows back the same way,
  so neither side keeps a smaller batch than the other would after the same failure.
Random weights never emit the end token, so both sides decode exactly the fixed number of new
tokens (64 and 256). Settings: the processor's native resolution (the default) and the
6,144-token-per-trajectory cap, then engine options (per-row prefill attention, static cache with
torch.compile) while the time budget lasts. Reported per run: s/trajectory, prefill TFLOP/s (useful
FLOPs of the real tokens, vision tower included: the timed window opens when the vision tower starts,
which transformers 5.24 runs in `generate` before the prefill forward and 5.17 inside it, and closes
when the prefill forward ends) against the ~790 TFLOP/s a bf16 matmul reaches on an H200, both sides'
peak GPU memory (`torch.cuda.max_memory_allocated`) and the engine's memory-model estimate of its
largest group, failed attempts, rows per generate call, and how many outputs are identical on both
sides. The attention implementation is the engine's own choice on the machine (flash-attn when
installed, else SDPA) unless `--attn` names one. Writes `docs/gpu-benchmarks.md` (date, GPU, versions,
settings); the last line printed is `ratio=<engine throughput / reference throughput>` for the
first setting measured (native resolution, 256 new tokens, unless skipped).

`--tiny` runs the same code path on the CPU with a tiny configuration, small frames and few tokens,
in about a minute on two CPU cores, and writes its report to a temporary folder unless `--out` is given.

Examples:
  python eval/gpu_bench.py                      # one H200: under 10 minutes, writes docs/gpu-benchmarks.md
  python eval/gpu_bench.py --time-budget 300    # fewer settings
  python eval/gpu_bench.py --tiny               # CPU check of the script (CI)
"""
from __future__ import annotations

import argparse
import datetime
import gc
import platform
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adaptrubric_local.engine.architectures import ARCHITECTURES

PRACTICAL_PEAK_TFLOPS = 790.0  # bf16 8192^3 matmul measured on the H200 available for checks
QWEN3VL_MAX_PIXELS, QWEN3VL_MIN_PIXELS = 16_777_216, 65_536  # Qwen3-VL preprocessor_config "size"
ARCH_TINY = dict(
    text=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, vocab_size=2048),
    vision=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                deepstack_visual_indexes=[1], num_position_embeddings=256))


@dataclass
class Run:
    """One measured side of one setting."""

    setting: str
    side: str  # engine | reference
    new_tokens: int
    n_traj: int
    seconds: float = 0.0
    prefill_s: float = 0.0
    prefill_flops: float = 0.0
    peak_gib: float = float("nan")
    estimate_gib: float = float("nan")  # engine only: the memory model's estimate of its largest group
    failed: int = 0  # attempts that ran out of memory
    rows_per_group: float = 0.0
    calls: int = 0
    texts: list = field(default_factory=list)
    note: str = ""
    same: str = ""  # reference only: outputs identical to the engine's

    @property
    def s_per_traj(self) -> float:
        return self.seconds / max(1, self.n_traj)

    @property
    def tflops(self) -> float:
        return self.prefill_flops / self.prefill_s / 1e12 if self.prefill_s else 0.0


# ---------------------------------------------------------------------------------------------- model
def build_model(arch: dict, tokenizer, device: str, dtype, attn: str = "sdpa"):
    """The architecture with random weights, token ids from `tokenizer`, no end token (fixed lengths),
    with attention implementation `attn`."""
    import torch
    from transformers import GenerationConfig, Qwen3VLForConditionalGeneration

    from adaptrubric_local.engine.architectures import QWEN_TOKEN_IDS, qwen3vl_config

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_TOKEN_IDS}
    cfg = qwen3vl_config({**arch, "tie_word_embeddings": False}, token_ids=ids)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3VLForConditionalGeneration._from_config(cfg, dtype=dtype, attn_implementation=attn)
    model.generation_config = GenerationConfig(eos_token_id=None, pad_token_id=ids["<|endoftext|>"], do_sample=False)
    return model.eval()


def param_counts(model) -> tuple[int, int, int]:
    """(language-model matmul parameters without embeddings and head, vision parameters, vocab x hidden)."""
    lm = vis = 0
    for name, p in model.named_parameters():
        if ".visual." in f".{name}":
            vis += p.numel()
        elif "embed_tokens" not in name and "lm_head" not in name and p.dim() > 1:
            lm += p.numel()
    head = model.get_output_embeddings().weight.numel()
    return lm, vis, head


class PrefillMeter:
    """Times every prefill forward (synchronised) and counts its useful FLOPs: 2 x parameters per real
    token (language model and vision tower), causal attention per row, full attention per image."""

    def __init__(self, model, cuda: bool):
        import torch

        self.model, self.cuda = model, cuda
        self.sync = torch.cuda.synchronize if cuda else (lambda: None)
        t, v = model.config.text_config, model.config.vision_config
        self.lm, self.vis, self.head = param_counts(model)
        self.t_layers, self.q_dim = t.num_hidden_layers, t.num_attention_heads * t.head_dim
        self.v_layers, self.v_hidden = v.depth, v.hidden_size
        self.seconds = self.flops = 0.0
        self._t0 = None
        self._flops = 0.0
        visual = model.model.visual
        self.handles = [visual.register_forward_pre_hook(self._vision, with_kwargs=True),
                        model.register_forward_pre_hook(self._pre, with_kwargs=True),
                        model.register_forward_hook(self._post, with_kwargs=True)]

    def _start(self) -> None:
        if self._t0 is None:
            self.sync()
            self._t0 = time.perf_counter()

    def _vision(self, module, args, kwargs):
        """The tower starts: the window opens (5.24 runs it in generate, before the prefill forward)."""
        grid = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
        self._start()
        if grid is not None:
            patches = (grid[:, 0] * grid[:, 1] * grid[:, 2]).tolist()
            self._flops += sum(2 * self.vis * p + 4 * self.v_layers * p * p * self.v_hidden for p in patches)

    def _pre(self, module, args, kwargs):
        ids = kwargs.get("input_ids")
        if ids is None or ids.shape[1] <= 1:
            return
        self._start()
        mask = kwargs.get("attention_mask")
        rows = mask.sum(-1).tolist() if mask is not None and mask.dim() == 2 else [ids.shape[1]] * ids.shape[0]
        self._flops += sum(2 * self.lm * n + 2 * self.t_layers * n * n * self.q_dim + 2 * self.head for n in rows)

    def _post(self, module, args, kwargs, out):
        if self._t0 is None:
            return
        self.sync()
        self.seconds += time.perf_counter() - self._t0
        self.flops += self._flops
        self._t0, self._flops = None, 0.0

    def reset(self):
        self.seconds = self.flops = self._flops = 0.0
        self._t0 = None

    def close(self):
        for h in self.handles:
            h.remove()


# ---------------------------------------------------------------------------------------------- data
def make_data(out: Path, n_traj: int, size: tuple[int, int], seed: int = 0) -> Path:
    """`n_traj` synthetic trajectories (synth's tasks, lengthened with distinct extra screens to 6-16
    frames, so selections hold 6-10 images and prompts differ in length), canonical JSONL."""
    from adaptrubric_local import load_trajectories
    from adaptrubric_local.formats import canonical
    from adaptrubric_local.synth import Screen, draw, synthesize
    from adaptrubric_local.types import Step

    tasks = max(1, n_traj // 4)
    path = synthesize(out, n_tasks=tasks, candidates=4, size=size, seed=seed)
    trajs = load_trajectories(path).trajectories[:n_traj]
    extra = []
    for k in range(14):
        p = out / "screens" / f"extra_{k:02d}.png"
        draw(Screen(app=f"Browse {k}", rows=[f"result {k}.{j}: item with a longer label" for j in range(4 + k % 9)],
                    keyboard=k % 4 == 0), size).save(p, optimize=False, compress_level=1)
        extra.append(str(p.resolve()))
    rng = random.Random(seed)
    for t in trajs:
        want = rng.randint(6, 16)
        picks = rng.sample(extra, k=max(0, min(len(extra), want - len(t.steps))))
        t.steps[1:1] = [Step(screenshot=p, action="swipe(direction='down')", action_type="scroll") for p in picks]
    data = out / "bench.jsonl"
    canonical.write(trajs, data)
    return data


# ---------------------------------------------------------------------------------------------- sides
def run_engine(engine, trajs, new_tokens: int, setting: str, meter, cuda: bool) -> tuple[Run, list]:
    """The pipeline over `trajs` through `engine`; returns the run and every request the engine got."""
    import torch

    from adaptrubric_local import AdaptRubric, PipelineConfig

    log: list = []
    texts: list = []
    real = engine.generate

    def generate(reqs):
        log.extend(reqs)
        outs = real(reqs)
        texts.extend(o.text for o in outs)
        return outs

    engine.generate = generate
    engine.config.max_new_tokens = new_tokens
    before = dict(engine.stats)
    pipe = AdaptRubric(engine, PipelineConfig(verify_max_new_tokens=new_tokens, trajectories_per_batch=len(trajs)))
    meter.reset()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    try:
        verdicts = pipe.score(trajs)
    finally:
        engine.generate = real
    if cuda:
        torch.cuda.synchronize()
    run = Run(setting, "engine", new_tokens, len(trajs), seconds=time.perf_counter() - t0, prefill_s=meter.seconds,
              prefill_flops=meter.flops, calls=len(log))
    after = engine.stats
    groups, rows = after["groups"] - before["groups"], after["rows"] - before["rows"]
    run.rows_per_group = rows / groups if groups else 0.0
    run.peak_gib = torch.cuda.max_memory_allocated() / 2 ** 30 if cuda else float("nan")
    run.estimate_gib = after["peak_estimate_gib"]
    run.failed = after["failed_attempts"] - before["failed_attempts"]
    run.texts = texts
    errors = [v.error for v in verdicts if v.status == "error"]
    if errors:
        run.note = f"{len(errors)} error verdicts, first: {errors[0][:200]}"
    return run, log


def run_reference(model, processor, engine, requests, new_tokens: int, batch: int, setting: str, meter,
                  cuda: bool) -> Run:
    """The plain script: chat template + processor (images at the engine's resolution) + generate, in
    arrival order, at most `batch` requests a call, under the engine's out-of-memory rules (a failed
    batch is halved; a `TokenBudget` started where the engine's starts learns what fits)."""
    import torch

    from adaptrubric_local.engine.budget import TokenBudget
    from adaptrubric_local.engine.images import plan_tokens

    device = next(model.parameters()).device
    planned = plan_tokens([r.images for r in requests], engine.images.cfg)
    costs = [engine._estimate(r, p) for r, p in zip(requests, planned)]
    budget = TokenBudget(engine.budget.start)
    meter.reset()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    texts, i, calls, halve_to = [], 0, 0, None
    while i < len(requests):
        n = 1
        while (n < (halve_to or batch) and i + n < len(requests)
               and (n + 1) * max(costs[i:i + n + 1]) <= budget.current):
            n += 1
        chunk, cost, oom = requests[i:i + n], n * max(costs[i:i + n]), False
        try:
            texts += _reference_batch(model, processor, engine, chunk, new_tokens, device)
        except torch.OutOfMemoryError:
            if n == 1:
                raise
            oom = True  # retried below, once the handler has let go of the failed attempt
        if oom:
            budget.out_of_memory(cost, n)
            halve_to = n // 2
            gc.collect()
            torch.cuda.empty_cache()
            continue
        budget.fitted(cost)
        budget.group_done()
        calls, i, halve_to = calls + 1, i + n, None
    if cuda:
        torch.cuda.synchronize()
    n_traj = sum(r.kind == "verify" for r in requests)
    run = Run(setting, "reference", new_tokens, n_traj, seconds=time.perf_counter() - t0, prefill_s=meter.seconds,
              prefill_flops=meter.flops, calls=calls, rows_per_group=len(requests) / max(1, calls),
              failed=budget.failed_attempts)
    run.peak_gib = torch.cuda.max_memory_allocated() / 2 ** 30 if cuda else float("nan")
    run.texts = texts
    if budget.failed_attempts:
        run.note = f"{budget.failed_attempts} out-of-memory attempts; token budget {budget.start} -> {budget.current}"
    return run


def _reference_batch(model, processor, engine, chunk, new_tokens, device) -> list[str]:
    import torch
    from PIL import Image

    from adaptrubric_local.engine.images import decode_resize, image_size, target_sizes

    texts, images = [], []
    for r in chunk:
        content = [{"type": "text", "text": r.prompt}] + [{"type": "image"} for _ in r.images]
        if r.suffix:
            content.append({"type": "text", "text": r.suffix})
        texts.append(processor.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                   add_generation_prompt=True))
        if r.images:  # the engine's resolution for this request (same budget) and the same resize kernel
            # (antialiased bicubic on uint8), so both sides see the same pixels and greedy outputs can match
            sizes = target_sizes([image_size(p) for p in r.images], engine.images.cfg)
            for p, (h, w) in zip(r.images, sizes):
                images.append(Image.fromarray(decode_resize(p, (h, w)).permute(1, 2, 0).numpy()))
    inputs = processor(text=texts, images=images or None, padding=True, return_tensors="pt").to(device)
    caps = [min(new_tokens, r.max_new_tokens or new_tokens) for r in chunk]
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=max(caps), do_sample=False)
    gen = out[:, inputs["input_ids"].shape[1]:].cpu()
    return [processor.tokenizer.decode(gen[b, :caps[b]], skip_special_tokens=True) for b in range(len(chunk))]


# ---------------------------------------------------------------------------------------------- report
def write_report(path: Path, runs: list, info: dict, skipped: list) -> None:
    lines = [f"# Verifier throughput on one GPU ({info['date']})", "",
             f"Produced by `python eval/gpu_bench.py{' --tiny' if info['tiny'] else ''}`"
             + (" -- **CPU smoke run with a tiny configuration: not a GPU measurement.**" if info["tiny"] else "."),
             "", f"- Hardware: {info['device']}; torch {info['torch']}, transformers {info['transformers']}, "
             f"Python {info['python']}.",
             f"- Model: {info['arch']} architecture with random {info['dtype']} weights ({info['params_b']:.2f}B "
             "parameters), built on the device; offline tokenizer (more tokens per prompt word than Qwen's); "
             f"attention `{info['attn']}` (the engine's choice here) unless a setting says otherwise.",
             f"- Data: {info['n_traj']} synthetic trajectories, {info['frames']} frames each of {info['size']}; "
             f"up to 10 selected per trajectory; engine batch size {info['batch']}, max_batch_tokens "
             f"{info['max_batch_tokens']}.",
             "- Both sides decode exactly the stated number of new tokens per request (random weights never "
             "stop); the reference replays every request the engine received (router, cue and verifier calls) "
             "through the processor and `model.generate` at the same image resolution.",
             f"- Prefill TFLOP/s counts useful FLOPs of real tokens (no padding) against a practical peak of "
             f"{PRACTICAL_PEAK_TFLOPS:.0f} TFLOP/s.", "",
             "| setting | side | new tokens | s / trajectory | prefill TFLOP/s | % of peak | peak GiB | "
             "estimate GiB (over weights) | failed attempts | rows / generate call | same text as engine | note |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in runs:
        lines.append(f"| {r.setting} | {r.side} | {r.new_tokens} | {r.s_per_traj:.3f} | {r.tflops:.4g} | "
                     f"{100 * r.tflops / PRACTICAL_PEAK_TFLOPS:.3g} | {r.peak_gib:.1f} | {r.estimate_gib:.1f} | "
                     f"{r.failed} | {r.rows_per_group:.1f} | {r.same} | {r.note} |")
    ratios = [(a, b) for a in runs for b in runs if a.side == "engine" and b.side == "reference"
              and (a.setting, a.new_tokens) == (b.setting, b.new_tokens)]
    if ratios:
        lines += ["", "Throughput ratio engine / reference: " + "; ".join(
            f"{a.setting}, {a.new_tokens} tokens: {b.s_per_traj / a.s_per_traj:.2f}x" for a, b in ratios) + "."]
    if skipped:
        lines += ["", "Not measured (time budget of one 10-minute command): " + "; ".join(skipped) + "."]
    lines += ["", "The paper reports 1.56 s per trajectory for Qwen3-VL-8B (Table 5, its own serving setup)."]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="report to write (default docs/gpu-benchmarks.md; with --tiny a "
                                                "temporary file)")
    ap.add_argument("--n-traj", type=int, default=32, help="trajectories per run (default 32)")
    ap.add_argument("--batch", type=int, default=16, help="engine batch size and the reference's (default 16)")
    ap.add_argument("--new-tokens", default="256,64", help="fixed new tokens per request, in order (default 256,64)")
    ap.add_argument("--cap", type=int, default=6144, help="visual tokens per trajectory for the capped setting")
    ap.add_argument("--time-budget", type=float, default=520.0,
                    help="seconds from the start by which the last run should end; a run predicted (from the runs "
                         "before it) to end later is skipped and listed (default 520: the command, installs "
                         "included, ends within 10 minutes on one H200)")
    ap.add_argument("--no-options", action="store_true", help="skip the engine-option runs (padded prefill, compile)")
    ap.add_argument("--attn", default=None, help="attention implementation (default: the engine's choice on this "
                                                 "machine: flash_attention_2 when flash-attn is installed, else sdpa; "
                                                 "on the CPU sdpa_padded_prefill)")
    ap.add_argument("--tiny", action="store_true", help="CPU check with a tiny configuration (CI time)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    import torch
    import transformers

    from adaptrubric_local import load_trajectories
    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig
    from adaptrubric_local.engine.loading import attn_implementation_for
    from adaptrubric_local.engine.tiny import build_processor, build_tokenizer

    cuda = not args.tiny
    if cuda and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU, or pass --tiny to check the script on the CPU", file=sys.stderr)
        return 2
    if args.tiny:
        args.n_traj, args.batch, args.cap = min(args.n_traj, 8), min(args.batch, 4), min(args.cap, 512)
        args.new_tokens = "6,3" if args.new_tokens == "256,64" else args.new_tokens
    new_tokens = [int(x) for x in args.new_tokens.split(",")]
    size = (216, 480) if args.tiny else (1080, 2400)
    device, dtype = ("cpu", torch.float32) if args.tiny else ("cuda", torch.bfloat16)
    tmp = Path(tempfile.mkdtemp(prefix="gpu_bench_"))
    out = Path(args.out) if args.out else (tmp / "gpu-benchmarks-tiny.md" if args.tiny else
                                           Path(__file__).resolve().parents[1] / "docs" / "gpu-benchmarks.md")

    t0 = time.perf_counter()
    trajs = load_trajectories(make_data(tmp / "data", args.n_traj, size)).trajectories
    frames = sorted({len(t.steps) for t in trajs})
    print(f"data: {len(trajs)} trajectories of {frames[0]}-{frames[-1]} frames {size[0]}x{size[1]} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    tokenizer = build_tokenizer(tokenizer_corpus())
    processor = build_processor(tokenizer, max_pixels=QWEN3VL_MAX_PIXELS, min_pixels=QWEN3VL_MIN_PIXELS)
    t0 = time.perf_counter()
    arch = ARCH_TINY if args.tiny else ARCHITECTURES["Qwen/Qwen3-VL-8B-Instruct"]
    attn_default = attn_implementation_for(HFEngineConfig(attn_implementation=args.attn), cuda)
    model = build_model(arch, tokenizer, device, dtype, attn_default)
    params = sum(p.numel() for p in model.parameters()) / 1e9
    print(f"model: {'tiny' if args.tiny else 'Qwen3-VL-8B'} architecture, {params:.2f}B parameters, built in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    meter = PrefillMeter(model, cuda)
    hw = torch.cuda.get_device_name(0) if cuda else (platform.processor() or "CPU")
    info = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), tiny=args.tiny,
                device=hw, torch=torch.__version__, transformers=transformers.__version__,
                python=platform.python_version(), arch="tiny" if args.tiny else "Qwen3-VL-8B",
                dtype="fp32" if args.tiny else "bf16", params_b=params, n_traj=len(trajs), attn=attn_default,
                frames=f"{frames[0]}-{frames[-1]}", size=f"{size[0]}x{size[1]}", batch=args.batch)

    def engine_for(cap, **opts):
        cfg = HFEngineConfig(model="random-" + info["arch"], max_batch_size=args.batch, max_visual_tokens=cap,
                             max_new_tokens=max(new_tokens), **opts)
        eng = HFEngine(cfg, loaded=(model, processor))
        eng.eos_ids = []  # random weights: no end token, every row decodes its full cap
        return eng

    settings = [("native", None, {}), (f"cap {args.cap}", args.cap, {})]
    plan = [(s, n) for n in new_tokens for s in settings]
    if not args.no_options:  # compile last: it may spend minutes compiling, so it starts only early enough
        if attn_default != "sdpa_padded_prefill":
            plan += [(("native, per-row prefill attention", None, {"attn": "sdpa_padded_prefill"}), new_tokens[0])]
        plan += [((f"cap {args.cap}, compile", args.cap, {"compile": True}), new_tokens[-1])]
    runs, skipped = [], []
    warm = False
    both: dict = {}  # cap -> seconds the last engine + reference pair took
    engine_only: dict = {}  # cap -> seconds the last engine run took
    for (name, cap, opts), n in plan:
        elapsed = time.perf_counter() - t_start
        if opts.get("compile"):  # compiling costs minutes before the first timed step
            predicted = 2 * engine_only.get(cap, 0.0) + 120.0
        else:
            predicted = (engine_only if opts else both).get(cap, 0.0)  # a 256-token run bounds a 64-token one
        if elapsed + predicted > args.time_budget:
            skipped.append(f"{name}, {n} tokens (predicted to end at {elapsed + predicted:.0f} s)")
            continue
        t_run = time.perf_counter()
        attn = opts.get("attn")
        eng = engine_for(cap, **({"compile": True} if opts.get("compile") else {}))
        info["max_batch_tokens"] = eng.max_batch_tokens
        try:
            if attn:
                from adaptrubric_local.engine.attention import register

                model.set_attn_implementation(register())
            if not warm:  # first CUDA calls (kernels, allocator) out of the timings
                run_engine(eng, trajs[:2], 2, "warm-up", meter, cuda)
                warm = True
            er, log = run_engine(eng, trajs, n, name, meter, cuda)
            runs.append(er)
            engine_only[cap] = time.perf_counter() - t_run
            print(f"{name:<40} engine    {n:>4} tokens: {er.s_per_traj:.3f} s/traj, prefill {er.prefill_s:.2f} s "
                  f"{er.tflops:.4g} TFLOP/s, "
                  f"peak {er.peak_gib:.1f} GiB, {er.rows_per_group:.1f} rows/call {er.note}", flush=True)
            if not opts:  # the reference for the plain settings
                rr = run_reference(model, processor, eng, log, n, args.batch, name, meter, cuda)
                rr.same = f"{sum(a == b for a, b in zip(er.texts, rr.texts))}/{len(log)}"
                runs.append(rr)
                both[cap] = time.perf_counter() - t_run
                print(f"{name:<40} reference {n:>4} tokens: {rr.s_per_traj:.3f} s/traj, prefill {rr.prefill_s:.2f} s "
                      f"{rr.tflops:.4g} TFLOP/s, peak {rr.peak_gib:.1f} GiB, {rr.rows_per_group:.1f} rows/call "
                      f"{rr.note}", flush=True)
        except Exception as exc:  # an option that fails is reported, the others still run
            runs.append(Run(name, "engine", n, len(trajs), note=f"failed: {type(exc).__name__}: {str(exc)[:200]}"))
            print(f"{name}: failed: {type(exc).__name__}: {exc}", flush=True)
        finally:
            eng.close()
            if attn:
                model.set_attn_implementation(attn_default)  # back to what the plain settings ran
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
        write_report(out, runs, info, skipped)  # after every run, so a cut-off run keeps what it measured
    meter.close()
    write_report(out, runs, info, skipped)
    print(f"wrote {out}; total {time.perf_counter() - t_start:.0f} s; skipped: {', '.join(skipped) or 'nothing'}")
    pairs = [(a, b) for a in runs for b in runs if a.side == "engine" and b.side == "reference"
             and (a.setting, a.new_tokens) == (b.setting, b.new_tokens) and a.seconds and b.seconds]
    if not pairs:
        print("ratio=nan (no setting was measured on both sides)")
        return 1
    a, b = pairs[0]
    print(f"setting for the ratio: {a.setting}, {a.new_tokens} new tokens")
    print(f"ratio={b.s_per_traj / a.s_per_traj:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
