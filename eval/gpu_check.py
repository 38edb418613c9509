#!/usr/bin/env python3
"""One command for a lent GPU: the checks that need one, in at most 8 minutes on one H200, with random
weights and nothing downloaded; every figure is appended to docs/gpu-benchmarks.md.

Stages, in this order (a stage predicted to end past `--time-budget` is skipped and listed):
1. throughput: the package's pipeline through `HFEngine` against the plain transformers script
   (eval/gpu_bench.py's two sides: same model object, same requests, same out-of-memory rules) on the
   Qwen3-VL-8B architecture, 16 synthetic trajectories of 1080x2400 frames at native resolution, 64
   fixed new tokens: s/trajectory both sides and their ratio, prefill TFLOP/s (vision tower included),
   peak GPU memory both sides, failed attempts, outputs identical on both sides;
2. the derived budget without OOM: an engine sizing its own groups (free memory x 0.85 checked against
   the memory model of the attention implementation in use, engine/memory.py) scores the verifier
   requests of 16 native trajectories: rows per group, failed attempts (0 expected), and the measured
   peak over the weights (`torch.cuda.max_memory_allocated`) against the model's estimate of the largest
   group: the GPU check of the memory model (`eval/prefill_memory.py` checks it on the CPU);
3. the OOM back-off: the same requests with the memory check off and a token budget far too large, so
   real CUDA out-of-memory errors happen: failed attempts, every change of the token budget, every
   verdict still there;
4. distillation memory: `eval/gpu_distill_memory.py` (Qwen3-VL-4B architecture, `distill train` defaults,
   native resolution): the planner's estimate against the measured peak; it leaves a trained LoRA
   adapter on the saved random base;
5. the adapter path: that base loaded the way `score --model DIR --adapter DIR` loads it, with and
   without the adapter: the adapter weights' dtype and the base's, s/trajectory and peak memory both ways.

The GPU machine has Python 3.12, torch, transformers 5.17, peft, accelerate, tokenizers, safetensors,
pillow, pyyaml, tqdm and matplotlib, no package index, and receives at most 64 MiB of files. What this
package needs beyond those are small wheels (pydantic, pydantic-core, annotated-types,
typing-inspection, qwen-vl-utils and the requests it imports); build the folder here, then carry it:

    python eval/gpu_check.py --download-wheels wheels          # here: pip download, cp312 manylinux x86_64 (~3 MB)
    python eval/gpu_check.py --wheels wheels                   # there: pip install --no-index --no-deps, then run
    python eval/gpu_check.py --dry-run                         # every stage on the CPU, tiny model (CI, ~2 min)

`--dry-run` runs the same code on the CPU with the tiny random Qwen3-VL and small frames, with an
injected out-of-memory rule in stage 3 (a CPU does not run out of memory) and a simulated memory
budget in stage 2, and prints the figures it would record (to a temporary report unless `--out`); it
exits non-zero when a stage fails, as the GPU run does.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import importlib.util
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "eval"))

WHEELS = ("pydantic", "pydantic-core", "annotated-types", "typing-inspection", "qwen-vl-utils", "requests",
          "urllib3", "idna", "certifi", "charset-normalizer")
MODULES = {"pydantic": "pydantic", "pydantic-core": "pydantic_core", "annotated-types": "annotated_types",
           "typing-inspection": "typing_inspection", "qwen-vl-utils": "qwen_vl_utils", "requests": "requests",
           "urllib3": "urllib3", "idna": "idna", "certifi": "certifi", "charset-normalizer": "charset_normalizer"}
PREDICTED_S = {"throughput": 130, "derived budget": 50, "OOM back-off": 70, "distillation memory": 170,
               "adapter": 70}  # on one H200, from the work each stage does (not measured there yet)


# ---------------------------------------------------------------------------------------------- wheels
def download_wheels(folder: Path, python: str = "3.12") -> int:
    """`pip download` the wheels the GPU machine lacks, at the versions installed here, for CPython
    `python` on manylinux x86_64."""
    from importlib.metadata import version

    specs = [f"{name}=={version(name)}" for name in WHEELS]
    tag = python.replace(".", "")
    cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--no-deps", "--dest", str(folder),
           "--python-version", python, "--implementation", "cp", "--abi", f"cp{tag}",
           "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64", "--platform", "any", *specs]
    print(" ".join(cmd))
    return subprocess.call(cmd)


def install_wheels(folder: Path) -> None:
    """Install the carried wheels whose modules are missing (no index, no dependencies)."""
    missing = [n for n in WHEELS if importlib.util.find_spec(MODULES[n]) is None]
    if not missing:
        return
    files = [str(p) for p in sorted(folder.glob("*.whl"))
             if any(re.match(n.replace("-", "[-_]") + r"-\d", p.name, re.I) for n in missing)]
    print(f"installing {len(files)} carried wheels for {', '.join(missing)}", flush=True)
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--quiet", *files])


# ---------------------------------------------------------------------------------------------- context
@dataclasses.dataclass
class Context:
    dry: bool
    out: Path
    work: Path
    budget_s: float
    t0: float = dataclasses.field(default_factory=time.perf_counter)
    bench: object = None
    model: object = None
    processor: object = None
    trajs: list = dataclasses.field(default_factory=list)
    new_tokens: int = 64
    figures: dict = dataclasses.field(default_factory=dict)
    lines: list = dataclasses.field(default_factory=list)
    distilled: dict = dataclasses.field(default_factory=dict)
    requests: list = dataclasses.field(default_factory=list)  # what the engine got in stage 1

    @property
    def cuda(self) -> bool:
        return not self.dry

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def record(self, stage: str, line: str, **figures) -> None:
        self.lines.append(f"- **{stage}**: {line}")
        self.figures[stage] = figures
        print(f"{stage}: {line}", flush=True)


def _gpu_bench():
    spec = importlib.util.spec_from_file_location("gpu_bench", ROOT / "eval" / "gpu_bench.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules["gpu_bench"] = bench  # dataclasses look their module up there
    spec.loader.exec_module(bench)
    return bench


def _peak_reset(ctx) -> float:
    """Reset the peak counter; the bytes allocated now (the weights and what stays)."""
    import torch

    if ctx.cuda:
        torch.cuda.synchronize()
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        return float(torch.cuda.memory_allocated())
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return float(_status("VmRSS"))


def _peak_over(ctx, base: float) -> float:
    import torch

    if ctx.cuda:
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2 ** 30
    return (_status("VmHWM") - base) / 2 ** 30


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        return int(re.search(rf"{key}:\s+(\d+)", fh.read()).group(1)) * 1024


def setup(ctx: Context) -> None:
    """The 8B architecture (tiny on the CPU) with random weights, the processor, the data."""
    import torch

    from adaptrubric_local import load_trajectories
    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.hf import HFEngineConfig
    from adaptrubric_local.engine.loading import attn_implementation_for
    from adaptrubric_local.engine.tiny import build_processor, build_tokenizer

    bench = ctx.bench = _gpu_bench()
    size = (216, 480) if ctx.dry else (1080, 2400)
    ctx.new_tokens = 3 if ctx.dry else 64
    ctx.trajs = load_trajectories(bench.make_data(ctx.work / "data", 8 if ctx.dry else 16, size)).trajectories
    tok = build_tokenizer(tokenizer_corpus())
    ctx.processor = build_processor(tok, max_pixels=bench.QWEN3VL_MAX_PIXELS, min_pixels=bench.QWEN3VL_MIN_PIXELS)
    arch = bench.ARCH_TINY if ctx.dry else bench.ARCHITECTURES["Qwen/Qwen3-VL-8B-Instruct"]
    attn = attn_implementation_for(HFEngineConfig(), ctx.cuda)
    dtype = torch.float32 if ctx.dry else torch.bfloat16
    ctx.model = bench.build_model(arch, tok, "cpu" if ctx.dry else "cuda", dtype, attn)
    print(f"set up in {ctx.elapsed():.0f} s: {'tiny' if ctx.dry else 'Qwen3-VL-8B'} architecture, attention "
          f"{attn}, {len(ctx.trajs)} trajectories of {size[0]}x{size[1]} frames", flush=True)


def _engine(ctx, **cfg):
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    eng = HFEngine(HFEngineConfig(model="random-8B" if ctx.cuda else "random-tiny", max_batch_size=16,
                                  max_new_tokens=ctx.new_tokens, **cfg), loaded=(ctx.model, ctx.processor))
    eng.eos_ids = []  # random weights: every row decodes its full cap
    return eng


def _verify_only(ctx, eng, trajs):
    """Score `trajs` with the verifier call alone (rules router, no cues): groups of verifier requests."""
    from adaptrubric_local import AdaptRubric, PipelineConfig

    pipe = AdaptRubric(eng, PipelineConfig(router="rules", fine=False, trajectories_per_batch=len(trajs),
                                           verify_max_new_tokens=ctx.new_tokens))
    t0 = time.perf_counter()
    verdicts = pipe.score(trajs)
    return verdicts, time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------- stages
def stage_throughput(ctx: Context) -> None:
    bench, eng = ctx.bench, _engine(ctx)
    meter = bench.PrefillMeter(ctx.model, ctx.cuda)
    try:
        bench.run_engine(eng, ctx.trajs[:2], 2, "warm-up", meter, ctx.cuda)
        er, log = bench.run_engine(eng, ctx.trajs, ctx.new_tokens, "native", meter, ctx.cuda)
        rr = bench.run_reference(ctx.model, ctx.processor, eng, log, ctx.new_tokens, 16, "native", meter, ctx.cuda)
    finally:
        meter.close()
        eng.close()
    ctx.requests = log
    same = sum(a == b for a, b in zip(er.texts, rr.texts))
    ratio = rr.s_per_traj / er.s_per_traj
    if ctx.dry:
        er.peak_gib = rr.peak_gib = float("nan")  # torch.cuda only: no peak on the CPU
    ctx.record("throughput", f"{len(ctx.trajs)} trajectories at native resolution, {ctx.new_tokens} new tokens: "
               f"engine {er.s_per_traj:.3f} s/trajectory ({er.rows_per_group:.1f} rows/call, prefill "
               f"{er.tflops:.4g} TFLOP/s, peak {er.peak_gib:.1f} GiB, {er.failed} failed attempts), reference "
               f"{rr.s_per_traj:.3f} s/trajectory ({rr.rows_per_group:.1f} rows/call, prefill {rr.tflops:.4g} "
               f"TFLOP/s, peak {rr.peak_gib:.1f} GiB, {rr.failed} failed attempts); **ratio {ratio:.2f}**; "
               f"{same}/{len(log)} outputs identical" + (f"; engine: {er.note}" if er.note else ""),
               ratio=ratio, engine_s=er.s_per_traj, reference_s=rr.s_per_traj, engine_peak_gib=er.peak_gib,
               reference_peak_gib=rr.peak_gib, same=f"{same}/{len(log)}")


def stage_budget(ctx: Context) -> None:
    from adaptrubric_local.engine import memory

    eng = _engine(ctx)  # no max_batch_tokens: derived from free memory on a GPU
    try:
        if ctx.dry and ctx.requests:  # the CPU derives no memory budget: one that holds the 3 longest rows
            from adaptrubric_local.engine.images import plan_tokens

            verify = [r for r in ctx.requests if r.kind == "verify"]
            planned = plan_tokens([r.images for r in verify], eng.images.cfg)
            shapes = sorted((eng._shape(r, p) for r, p in zip(verify, planned)), reverse=True)[:3]
            g = memory.Group([x[0] for x in shapes], [x[1] for x in shapes], ctx.new_tokens, left_padded=True)
            eng.memory_budget = memory.estimate(eng.sizes, g, eng.attn, eng._dtype_bytes(), "cuda").total
        base = _peak_reset(ctx)
        verdicts, seconds = _verify_only(ctx, eng, ctx.trajs)
        peak = _peak_over(ctx, base)
        s = eng.stats
    finally:
        eng.close()
    errors = sum(v.status == "error" for v in verdicts)
    est = s["peak_estimate_gib"]
    what = "torch.cuda.max_memory_allocated" if ctx.cuda else "resident memory (CPU, not GPU memory)"
    ctx.record("derived budget", f"memory budget {s['memory_budget_gib']} GiB ({'simulated, ' if ctx.dry else ''}"
               f"85% of the free memory), token budget {s['start_batch_tokens']:,}, attention "
               f"{s['attn_implementation']}; "
               f"{s['rows']} verifier rows in {s['groups']} groups ({s['rows_per_group']:.1f} rows/group), "
               f"{s['failed_attempts']} failed attempts, {errors} error verdicts, {seconds / len(verdicts):.3f} "
               f"s/trajectory; peak over the weights ({what}) {peak:.2f} GiB against the memory model's "
               f"{est:.2f} GiB for the largest group: **measured/estimate {peak / est if est else float('nan'):.2f}**",
               failed=s["failed_attempts"], peak_gib=peak, estimate_gib=est, rows_per_group=s["rows_per_group"])
    if s["failed_attempts"] and ctx.cuda:
        ctx.lines.append("  - the derived budget ran out of memory: the memory model undercounts on this machine")


def stage_oom(ctx: Context) -> None:
    eng = _engine(ctx, max_batch_tokens=10_000_000)  # given: no memory check, far more than fits
    if ctx.dry:
        eng.inject_oom = lambda n: n > 2  # a CPU does not run out of memory: groups above 2 rows "fail"
    try:
        verdicts, seconds = _verify_only(ctx, eng, ctx.trajs)
        s = eng.stats
    finally:
        eng.close()
    errors = sum(v.status == "error" for v in verdicts)
    changes = "; ".join(f"group {c['group']}: {c['from']:,} -> {c['to']:,} ({c['why']})" for c in s["budget_changes"])
    ctx.record("OOM back-off", f"{'injected above 2 rows' if ctx.dry else 'real CUDA out-of-memory errors'}, token "
               f"budget started at {s['start_batch_tokens']:,}: **{s['failed_attempts']} failed attempts**, "
               f"{len(verdicts) - errors}/{len(verdicts)} verdicts without error, {s['groups']} groups "
               f"({s['rows_per_group']:.1f} rows/group), {seconds / len(verdicts):.3f} s/trajectory; budget "
               f"changes: {changes or 'none'}", failed=s["failed_attempts"], errors=errors,
               final_tokens=s["max_batch_tokens"])


def stage_distill(ctx: Context) -> None:
    spec = importlib.util.spec_from_file_location("gpu_distill_memory", ROOT / "eval" / "gpu_distill_memory.py")
    gdm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gdm)
    res = gdm.measure(ctx.work / "distill", frames=2 if ctx.dry else 10, tiny=ctx.dry)
    ctx.distilled = res
    ctx.record("distillation memory", res["line"], estimate_gib=res["estimate_gib"], measured_gib=res["measured_gib"],
               ratio=res["ratio"])


def stage_adapter(ctx: Context) -> None:
    import torch

    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    if not ctx.distilled:
        raise RuntimeError("no adapter: the distillation stage did not run")
    folder, adapter = ctx.distilled["model"], ctx.distilled["adapter"]
    trajs = ctx.trajs[:8]
    results = {}
    for name, extra in (("base", {}), ("adapter", {"adapter": str(adapter)})):
        eng = HFEngine(HFEngineConfig(model=str(folder), max_batch_size=16, max_new_tokens=ctx.new_tokens, **extra))
        eng.eos_ids = []
        try:
            dtypes = sorted({str(p.dtype).replace("torch.", "") for n, p in eng.model.named_parameters()
                             if "lora_" in n}) or ["-"]
            base_dtype = str(next(p.dtype for n, p in eng.model.named_parameters()
                                  if "lora_" not in n and p.is_floating_point())).replace("torch.", "")
            _verify_only(ctx, eng, trajs[:1])  # warm-up
            mark = _peak_reset(ctx)
            verdicts, seconds = _verify_only(ctx, eng, trajs)
            results[name] = dict(s=seconds / len(trajs), peak=_peak_over(ctx, mark), lora=dtypes, base=base_dtype,
                                 errors=sum(v.status == "error" for v in verdicts))
        finally:
            eng.close()
            del eng
            gc.collect()
            if ctx.cuda:
                torch.cuda.empty_cache()
    b, a = results["base"], results["adapter"]
    ctx.record("adapter", f"`score --adapter` on the saved random base ({'tiny' if ctx.dry else 'Qwen3-VL-4B'}): "
               f"**adapter weights {', '.join(a['lora'])}**, base weights {a['base']}; {len(trajs)} trajectories, "
               f"{ctx.new_tokens} new tokens: base {b['s']:.3f} s/trajectory, peak over the weights {b['peak']:.2f} "
               f"GiB; with the adapter {a['s']:.3f} s/trajectory ({a['s'] / b['s']:.2f}x), peak {a['peak']:.2f} GiB; "
               f"error verdicts {b['errors']}/{a['errors']}", adapter_dtype=a["lora"], base_dtype=a["base"],
               slowdown=a["s"] / b["s"])


STAGES = (("throughput", stage_throughput), ("derived budget", stage_budget), ("OOM back-off", stage_oom),
          ("distillation memory", stage_distill), ("adapter", stage_adapter))


# ---------------------------------------------------------------------------------------------- main
def report_section(ctx: Context, failed: list, skipped: list) -> str:
    import torch
    import transformers

    device = torch.cuda.get_device_name(0) if ctx.cuda else (platform.processor() or "CPU")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"\n## GPU check: `python eval/gpu_check.py{' --dry-run' if ctx.dry else ''}` ({when})\n\n"
            f"{device}; torch {torch.__version__}, transformers {transformers.__version__}, Python "
            f"{platform.python_version()}; {ctx.elapsed():.0f} s in all."
            + (" **CPU dry run with the tiny model: not a GPU measurement.**" if ctx.dry else "") + "\n\n")
    tail = []
    if skipped:
        tail.append(f"- not run (time budget of {ctx.budget_s:.0f} s): {', '.join(skipped)}")
    for name, err in failed:
        tail.append(f"- **{name} failed**: {err}")
    return head + "\n".join(ctx.lines + tail) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="every stage on the CPU with the tiny model (CI)")
    ap.add_argument("--out", default=None, help="report to append to (default docs/gpu-benchmarks.md; with "
                                                "--dry-run a temporary file)")
    ap.add_argument("--work", default=None, help="working folder (default: a temporary one)")
    ap.add_argument("--time-budget", type=float, default=450.0,
                    help="seconds by which the last stage should end (default 450: 8 minutes with start-up)")
    ap.add_argument("--stages", default=",".join(n for n, _ in STAGES), help="stages to run (comma-separated)")
    ap.add_argument("--wheels", default=None, help="a folder of carried wheels to install first (no index)")
    ap.add_argument("--download-wheels", metavar="DIR", default=None,
                    help="download the wheels the GPU machine lacks into DIR (cp312 manylinux x86_64) and exit")
    ap.add_argument("--python-version", default="3.12", help="for --download-wheels (default 3.12)")
    args = ap.parse_args(argv)
    if args.download_wheels:
        return download_wheels(Path(args.download_wheels), args.python_version)
    if args.wheels:
        install_wheels(Path(args.wheels))
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device: run this on a GPU, or pass --dry-run to check it on the CPU", file=sys.stderr)
        return 2
    work = Path(args.work or tempfile.mkdtemp(prefix="gpu_check_"))
    out = Path(args.out) if args.out else (work / "gpu-check-dry-run.md" if args.dry_run else
                                           ROOT / "docs" / "gpu-benchmarks.md")
    ctx = Context(dry=args.dry_run, out=out, work=work, budget_s=float("inf") if args.dry_run else args.time_budget)
    wanted = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = set(wanted) - {n for n, _ in STAGES}
    if unknown:
        print(f"unknown stage(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    failed, skipped = [], []
    try:
        setup(ctx)
    except Exception as exc:
        traceback.print_exc()
        failed.append(("set-up", f"{type(exc).__name__}: {exc}"))
    for name, fn in STAGES:
        if failed and failed[0][0] == "set-up":
            break
        if name not in wanted:
            continue
        if name in ("distillation memory", "adapter") and ctx.model is not None:
            ctx.model = None  # the 8B model's memory goes back before the 4B is built
            gc.collect()
            if ctx.cuda:
                torch.cuda.empty_cache()
        if ctx.elapsed() + PREDICTED_S[name] > ctx.budget_s:
            skipped.append(f"{name} (predicted to end at {ctx.elapsed() + PREDICTED_S[name]:.0f} s)")
            continue
        t0 = time.perf_counter()
        try:
            fn(ctx)
        except Exception as exc:
            traceback.print_exc()
            failed.append((name, f"{type(exc).__name__}: {str(exc)[:300]}"))
        print(f"  ({name}: {time.perf_counter() - t0:.0f} s)", flush=True)
    section = report_section(ctx, failed, skipped)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a") as fh:
        fh.write(("# GPU benchmarks\n" if not out.is_file() or not out.stat().st_size else "") + section)
    print(f"appended to {out}; {ctx.elapsed():.0f} s; failed: {', '.join(n for n, _ in failed) or 'none'}; "
          f"skipped: {', '.join(skipped) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
