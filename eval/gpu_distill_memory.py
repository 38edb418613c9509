"""On one GPU: the memory planner's estimate against the measured peak of `distill train` for the
Qwen3-VL-4B architecture at the training defaults (LoRA r16, native resolution, bf16, gradient
checkpointing, one example per step).

Builds the published 4B architecture with random bf16 weights on the GPU (no download: the tiny
tokenizer's ids, the real 151,936-row vocabulary, Qwen3-VL's image processor bounds), saves it, makes
4 trajectories of 10 phone screenshots (1080x2400; 28K tokens each at native resolution), collects
them with the labels as teacher, then runs `adaptrubric distill train` in its own process. The trainer
records `torch.cuda.max_memory_allocated()` and the plan it made in `train_summary.json`; both, and
their ratio, are printed and appended to docs/gpu-benchmarks.md. One command, about 3-4 minutes on an
H200 (most of it writing and reading 9 GB of weights). The adapter it trains is left in
`<out>/ckpt` (eval/gpu_check.py scores with it).

`--tiny` runs the same steps on the CPU with the tiny random Qwen3-VL and 2 small frames per
trajectory; the measured figure is then the training process's peak resident memory (RUSAGE_CHILDREN
of a fresh parent, as eval/distill_memory.py measures it) against the plan's estimate, which on the CPU
includes the interpreter's own resident size.

    python eval/gpu_distill_memory.py --out runs/gpu-distill
    python eval/gpu_distill_memory.py --tiny --out /tmp/gdm      # CPU check of the script
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build_model(folder: Path, name: str) -> None:
    """The published architecture with random weights, saved like a checkpoint."""
    import torch
    from transformers import GenerationConfig, Qwen3VLForConditionalGeneration

    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.architectures import ARCHITECTURES, QWEN_TOKEN_IDS, qwen3vl_config
    from adaptrubric_local.engine.openai_engine import QWEN3VL_MAX_PIXELS, QWEN3VL_MIN_PIXELS
    from adaptrubric_local.engine.tiny import build_processor, build_tokenizer

    tok = build_tokenizer(tokenizer_corpus())
    ids = {t: tok.convert_tokens_to_ids(t) for t in QWEN_TOKEN_IDS}
    cfg = qwen3vl_config(ARCHITECTURES[name], token_ids=ids)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen3VLForConditionalGeneration._from_config(cfg, dtype=torch.bfloat16)
    model.generation_config = GenerationConfig(eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    model.save_pretrained(folder, safe_serialization=True)
    build_processor(tok, max_pixels=QWEN3VL_MAX_PIXELS, min_pixels=QWEN3VL_MIN_PIXELS).save_pretrained(folder)
    del model
    torch.cuda.empty_cache()


def _distill_memory():
    spec = importlib.util.spec_from_file_location("distill_memory", ROOT / "eval" / "distill_memory.py")
    dm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dm)
    return dm


def measure(out: Path, name: str = "Qwen/Qwen3-VL-4B-Instruct", frames: int = 10, tiny: bool = False) -> dict:
    """Build (or reuse) the model, collect, train one epoch in a child process; the plan's estimate and
    the measured peak. Returns the figures, the line for the report, the model folder and the adapter."""
    dm = _distill_memory()
    from adaptrubric_local.distill.collect import CollectConfig, collect, label_teacher, teacher_pipeline
    from adaptrubric_local.formats import load_trajectories

    t0 = time.perf_counter()
    model = out / ("tiny-model" if tiny else "random-weights")
    if not (model / "config.json").is_file():
        if tiny:
            from adaptrubric_local.dry_run import tokenizer_corpus
            from adaptrubric_local.engine.tiny import make_tiny_model

            make_tiny_model(model, corpus=tokenizer_corpus())
        else:
            build_model(model, name)
    size = (216, 480) if tiny else (1080, 2400)
    data = dm.phone_data(out / "data", n_traj=4, frames=frames, size=size)
    dist = out / "distill"
    if not (dist / "train.jsonl").is_file():
        collect(data, dist, label_teacher(load_trajectories(data).trajectories), teacher_pipeline("labels"),
                CollectConfig(val_fraction=0.0), progress=False)
    ckpt = out / "ckpt"
    cmd = [sys.executable, "-m", "adaptrubric_local.cli", "distill", "train", str(dist), "--model", str(model),
           "--out", str(ckpt), "--epochs", "1", "--grad-accum", "4", "--no-progress"]
    env_path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    os.environ["PYTHONPATH"] = env_path  # the child imports this checkout, installed or not
    p = dm.run(cmd)
    if p["rc"] != 0:
        raise RuntimeError(f"distill train failed: {p['stderr'][-3000:]}")
    s = json.loads((ckpt / "train_summary.json").read_text())
    est = s["plan"]["estimate_gib"]
    measured = s["peak_gpu_memory_gib"] if not tiny else p["peak_gb"]
    what = "torch.cuda.max_memory_allocated" if not tiny else "peak resident memory of the training process"
    L = s["plan"]["lengths"]
    arch = "tiny Qwen3-VL" if tiny else f"{name} architecture (random bf16 weights)"
    line = (f"{arch}, `distill train` defaults (LoRA r16, native resolution, gradient checkpointing, batch 1), "
            f"{L['examples']} trajectories of {frames} {size[0]}x{size[1]} frames ({L['total']['max']:,} tokens, "
            f"{L['visual']['max']:,} visual): planner estimate {est['total']:.2f} GiB (weights {est['weights']:.2f}, "
            f"LoRA+optimizer {est['lora_optimizer']:.2f}, activations {est['activations']:.2f}, loss {est['loss']:.2f}"
            + (f", runtime {est['runtime']:.2f}" if tiny else "") + f"); measured {what} {measured:.2f} GiB; "
            f"measured/estimate {measured / est['total']:.2f}; {s['seconds']:.0f} s training, "
            f"{time.perf_counter() - t0:.0f} s in all.")
    return {"estimate_gib": est["total"], "measured_gib": measured, "ratio": measured / est["total"], "line": line,
            "model": model, "adapter": ckpt, "train_seconds": s["seconds"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/gpu-distill", help="working folder (default runs/gpu-distill)")
    ap.add_argument("--model", default="Qwen/Qwen3-VL-4B-Instruct", help="architecture (engine/architectures.py)")
    ap.add_argument("--frames", type=int, default=None, help="phone screenshots per trajectory (default 10; "
                                                              "2 with --tiny)")
    ap.add_argument("--report", default=str(ROOT / "docs" / "gpu-benchmarks.md"), help="file to append to")
    ap.add_argument("--tiny", action="store_true", help="the CPU check: tiny model, small frames, no report")
    args = ap.parse_args(argv)
    import torch

    if not args.tiny and not torch.cuda.is_available():
        print("no CUDA device: this measurement needs a GPU (or --tiny for the CPU check)", file=sys.stderr)
        return 2
    res = measure(Path(args.out), args.model, args.frames or (2 if args.tiny else 10), tiny=args.tiny)
    print(res["line"])
    if args.tiny:
        return 0
    report = Path(args.report)
    head = "" if report.is_file() else "# GPU benchmarks\n"
    with open(report, "a") as fh:
        fh.write(f"{head}\n## Distillation memory: `python eval/gpu_distill_memory.py`\n\n"
                 f"{datetime.date.today()}, {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
                 f"Python {platform.python_version()}.\n\n{res['line']}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
