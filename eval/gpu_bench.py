#!/usr/bin/env python3
"""GPU benchmark: Qwen3-VL-4B and -8B verifier cost per trajectory, with random weights (no download).

Both architectures are built from their published configurations (sizes below; the printed
parameter counts should read about 4.4B and 8.8B) with random bf16 weights on the GPU. Each
trajectory is a verifier-sized text prompt plus 10 screenshots of 1080x2400 run through the
package's image pipeline (per-trajectory visual-token budget as in `adaptrubric score`), and
generation is fixed at 256 new tokens (EOS suppressed), so timings do not depend on what random
weights say. Reported: seconds per trajectory (generation; preprocessing separately), peak GPU
memory, batch 1 vs batched, bf16 vs 4-bit nf4 (bitsandbytes; 8B only, loaded from a saved copy).
Writes a markdown table (default docs/benchmarks.md) with date and hardware, and ends with
`ratio=<batched speed-up for 8B bf16>`. Meant to finish in under 8 minutes on one H200.

`--tiny` runs the same code on the CPU with tiny configurations, to check the script without a GPU.

Usage: python eval/gpu_bench.py [--out docs/benchmarks.md] [--batch 16] [--n-batch1 3] [--tiny]
"""
import argparse
import datetime
import gc
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Published Qwen3-VL Instruct configurations (text tower / vision tower).
ARCHS = {
    "Qwen3-VL-4B": dict(
        text=dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
                  num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True),
        vision=dict(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, out_hidden_size=2560,
                    deepstack_visual_indexes=[5, 11, 17], num_position_embeddings=2304)),
    "Qwen3-VL-8B": dict(
        text=dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                  num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=False),
        vision=dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, out_hidden_size=4096,
                    deepstack_visual_indexes=[8, 16, 24], num_position_embeddings=2304)),
}
TINY = dict(text=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=16, vocab_size=151936, tie_word_embeddings=False),
            vision=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                        deepstack_visual_indexes=[1], num_position_embeddings=256))
IMAGE_TOKEN, VIDEO_TOKEN, VSTART, VEND = 151655, 151656, 151652, 151653


def build(arch: dict, device, dtype):
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    text = dict(arch["text"], max_position_embeddings=32768, rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20]
                                 if arch["text"]["head_dim"] == 128 else [4, 2, 2], "mrope_interleaved": True})
    tie = text.pop("tie_word_embeddings")
    vision = dict(arch["vision"], patch_size=16, spatial_merge_size=2, temporal_patch_size=2)
    cfg = Qwen3VLConfig(text_config=text, vision_config=vision, image_token_id=IMAGE_TOKEN, video_token_id=VIDEO_TOKEN,
                        vision_start_token_id=VSTART, vision_end_token_id=VEND, tie_word_embeddings=tie)
    with torch.device(device):
        model = Qwen3VLForConditionalGeneration._from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def make_inputs(pipe, frames, n_traj, text_tokens, device):
    """Batched inputs for n_traj trajectories: text, then 10 images each (real 1080x2400 frames)."""
    import torch

    t0 = time.perf_counter()
    imgs = pipe.process([frames] * n_traj)
    prep = (time.perf_counter() - t0) / n_traj
    g = torch.Generator().manual_seed(0)
    rows = []
    for i in range(n_traj):
        ids = torch.randint(1000, 150000, (text_tokens,), generator=g).tolist()
        for n in imgs.tokens_per_image[i]:
            ids += [VSTART] + [IMAGE_TOKEN] * n + [VEND]
        ids += torch.randint(1000, 150000, (32,), generator=g).tolist()
        rows.append(ids)
    width = max(map(len, rows))
    input_ids = torch.full((n_traj, width), 0, dtype=torch.long)
    mask = torch.zeros((n_traj, width), dtype=torch.long)
    for i, r in enumerate(rows):  # left padding
        input_ids[i, width - len(r):] = torch.tensor(r)
        mask[i, width - len(r):] = 1
    types = (input_ids == IMAGE_TOKEN).long()
    inputs = dict(input_ids=input_ids, attention_mask=mask, mm_token_type_ids=types,
                  pixel_values=imgs.pixel_values, image_grid_thw=imgs.image_grid_thw)
    pin = device.startswith("cuda")
    return {k: (v.pin_memory() if pin and k == "pixel_values" else v).to(device, non_blocking=True)
            for k, v in inputs.items()}, prep, imgs.visual_tokens(0)


def timed_generate(model, inputs, new_tokens, device):
    import torch

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
    sync()
    assert out.shape[1] - inputs["input_ids"].shape[1] == new_tokens
    return time.perf_counter() - t0


def run_arch(name, model, pipe, frames, args, device, label):
    import torch

    rows = []
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    one, prep, vis = make_inputs(pipe, frames, 1, args.text_tokens, device)
    timed_generate(model, one, 8, device)  # warm-up
    t1 = sum(timed_generate(model, one, args.new_tokens, device) for _ in range(args.n_batch1)) / args.n_batch1
    peak1 = torch.cuda.max_memory_allocated() / 2 ** 30 if device.startswith("cuda") else float("nan")
    rows.append((name, label, 1, t1, peak1, prep, vis))
    del one
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    many, prep_b, _ = make_inputs(pipe, frames, args.batch, args.text_tokens, device)
    tb = timed_generate(model, many, args.new_tokens, device) / args.batch
    peakb = torch.cuda.max_memory_allocated() / 2 ** 30 if device.startswith("cuda") else float("nan")
    rows.append((name, label, args.batch, tb, peakb, prep_b, vis))
    del many
    for r in rows:
        print(f"  {r[0]:<12} {r[1]:<5} batch {r[2]:>3}: {r[3]:.3f} s/traj, peak {r[4]:.1f} GiB", flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "gpu-benchmarks.md"),
                    help="markdown table to write (default docs/gpu-benchmarks.md)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--n-batch1", type=int, default=3, help="trajectories timed one at a time")
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--text-tokens", type=int, default=1500, help="verifier prompt text length")
    ap.add_argument("--no-4bit", action="store_true", help="skip the 4-bit run")
    ap.add_argument("--tiny", action="store_true", help="CPU smoke run with tiny configs (checks the script)")
    ap.add_argument("--time-budget", type=float, default=420.0,
                    help="seconds; phases that would start later are skipped and listed in the report (default 420)")
    args = ap.parse_args()
    args.t_start = time.perf_counter()
    args.skipped = []

    import torch

    from adaptrubric_local.engine.images import ImageConfig, ImagePipeline
    from adaptrubric_local.synth import Screen, draw

    device = "cpu" if args.tiny else "cuda"
    if not args.tiny and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU, or pass --tiny to check the script on the CPU", file=sys.stderr)
        return 2
    if args.tiny:
        args.batch, args.n_batch1, args.new_tokens, args.text_tokens = 4, 1, 8, 64
    tmp = Path(tempfile.mkdtemp())
    frames = []
    for i in range(10):
        p = tmp / f"f{i}.png"
        draw(Screen(app=f"App {i}", rows=[f"item {i}.{j}" for j in range(14)], keyboard=i % 3 == 0), (1080, 2400)).save(p)
        frames.append(str(p))
    pipe = ImagePipeline(ImageConfig(max_visual_tokens=6144))
    hw = torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or "CPU"
    print(f"device: {hw}; torch {torch.__version__}; {args.new_tokens} new tokens; 10 screenshots 1080x2400 "
          f"per trajectory; text prompt {args.text_tokens} tokens", flush=True)
    rows, params = [], {}
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    for name, arch in ARCHS.items():
        if time.perf_counter() - args.t_start > args.time_budget:
            args.skipped.append(f"{name} (time budget of {args.time_budget:.0f} s reached)")
            continue
        arch = TINY if args.tiny else arch
        t0 = time.perf_counter()
        model = build(arch, device, dtype)
        params[name] = sum(p.numel() for p in model.parameters()) / 1e9
        print(f"{name}: {params[name]:.2f}B parameters, built in {time.perf_counter() - t0:.0f} s", flush=True)
        rows += run_arch(name, model, pipe, frames, args, device, "bf16" if device == "cuda" else "fp32")
        if name == "Qwen3-VL-8B" and not args.no_4bit:
            if time.perf_counter() - args.t_start > args.time_budget * 0.6:
                args.skipped.append(f"{name} 4-bit (time budget: it needs a save and a reload)")
            else:
                rows += run_4bit(name, model, pipe, frames, args, device, tmp)
        del model
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    if not rows:
        print(f"nothing was measured within the time budget ({args.time_budget:.0f} s)", file=sys.stderr)
        return 1
    write_report(rows, params, hw, args)
    name = "Qwen3-VL-8B" if any(r[0] == "Qwen3-VL-8B" for r in rows) else rows[0][0]
    b1 = next(r for r in rows if r[0] == name and r[2] == 1 and r[1] in ("bf16", "fp32"))
    bb = next(r for r in rows if r[0] == name and r[2] == args.batch and r[1] in ("bf16", "fp32"))
    print(f"total {time.perf_counter() - args.t_start:.0f} s; skipped: {', '.join(args.skipped) or 'nothing'}")
    print(f"ratio={b1[3] / bb[3]:.2f}")
    return 0


def run_4bit(name, model, pipe, frames, args, device, tmp):
    """Save the random model, reload it in 4-bit nf4, and time it the same way."""
    import torch
    from transformers import BitsAndBytesConfig, Qwen3VLForConditionalGeneration

    if device != "cuda":
        print("  (4-bit skipped on the CPU smoke run)")
        return []
    t0 = time.perf_counter()
    path = tmp / "ckpt8b"
    model.save_pretrained(path, safe_serialization=True)
    model.to("cpu")
    torch.cuda.empty_cache()
    q = Qwen3VLForConditionalGeneration.from_pretrained(
        path, quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                     bnb_4bit_compute_dtype=torch.bfloat16,
                                                     bnb_4bit_use_double_quant=True,
                                                     llm_int8_skip_modules=["model.visual", "lm_head"]),
        device_map="cuda", local_files_only=True).eval()
    print(f"  4-bit reload in {time.perf_counter() - t0:.0f} s", flush=True)
    rows = run_arch(name, q, pipe, frames, args, device, "nf4")
    del q
    return rows


def write_report(rows, params, hw, args):
    out = Path(args.out if not args.tiny else Path(tempfile.mkdtemp()) / "benchmarks-tiny.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# Verifier cost on one GPU ({datetime.date.today().isoformat()})", "",
             f"Hardware: {hw}. Random weights built from the published configurations "
             f"({', '.join(f'{k} {v:.2f}B params' for k, v in params.items())}); 10 screenshots of 1080x2400 per "
             f"trajectory through the package's image pipeline (visual tokens per trajectory: {rows[0][6]}), "
             f"{args.text_tokens} text tokens, exactly {args.new_tokens} generated tokens. Produced by "
             "`python eval/gpu_bench.py`." + (" **CPU smoke run with tiny configs; not a GPU measurement.**"
                                              if args.tiny else ""), "",
             "| model | weights | batch | s / trajectory (generation) | peak GPU memory (GiB) | "
             "preprocessing s / trajectory |", "|---|---|---:|---:|---:|---:|"]
    for name, label, bs, t, peak, prep, _ in rows:
        lines.append(f"| {name} | {label} | {bs} | {t:.3f} | {peak:.1f} | {prep:.3f} |")
    if args.skipped:
        lines += ["", "Skipped: " + "; ".join(args.skipped) + "."]
    lines += ["", "The paper reports 1.56 s per trajectory for Qwen3-VL-8B (Table 5, its own serving setup)."]
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
