#!/usr/bin/env python3
"""Image preprocessing throughput: the package's pipeline vs one processor call per image.

Baseline: what a straightforward integration does per screenshot: PIL open + convert("RGB"), then
the Qwen3-VL image processor (transformers, torchvision backend) on that one image.
Ours: adaptrubric_local.engine.images.ImagePipeline: header-only sizing, threaded torchvision decode
and uint8 antialiased resize, one tensor-level normalise+patchify per batch.
Both use the same pixel cap (no per-trajectory budget), and the outputs are checked to be equal.
Images: the AndroidGen screenshots in ../shared when present, else generated 1080x2400 frames.
Each repeat times both sides back to back; the report gives the median with the min-max spread of
each side and of the per-repeat ratio, and the machine (CPU, cores, load). Ends with
`ratio=<median speed-up>`.

What is machine-dependent: the pipeline's gain comes from decoding and resizing in threads outside
the GIL (it grows with free cores and shrinks when other processes hold them) and from skipping
the processor's per-call overhead (it grows as the CPU gets faster relative to Python). On 2 cores
under load the ratio has ranged from about 2 to 3.

Usage: python eval/bench_preprocess.py [--n 40] [--repeats 5] [--batch 10] [--max-pixels 1048576]
"""
import argparse
import glob
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine, spread


def generated_frames(n: int, folder: Path) -> list[str]:
    from adaptrubric_local.synth import Screen, draw

    out = []
    for i in range(n):
        p = folder / f"frame_{i}.png"
        draw(Screen(app=f"App {i}", rows=[f"row {i} {j}" for j in range(12)], keyboard=i % 2 == 0),
             (1080, 2400)).save(p)
        out.append(str(p))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40, help="images per repeat")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=10, help="images per request for our pipeline (one trajectory)")
    ap.add_argument("--max-pixels", type=int, default=1024 * 32 * 32)
    args = ap.parse_args()

    import torch
    from PIL import Image

    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.images import ImageConfig, ImagePipeline
    from adaptrubric_local.engine.tiny import build_processor, build_tokenizer

    shared = sorted(glob.glob(str(Path(__file__).resolve().parents[2] / "shared" / "data" / "androidgen-democase"
                                  / "*" / "screenshots" / "*-raw.png")))
    tmp = tempfile.TemporaryDirectory()
    paths = shared[: args.n] if len(shared) >= args.n else generated_frames(args.n, Path(tmp.name))
    source = "AndroidGen screenshots (../shared)" if paths and paths[0] in shared else "generated 1080x2400 frames"
    processor = build_processor(build_tokenizer(tokenizer_corpus()), max_pixels=args.max_pixels).image_processor
    pipe = ImagePipeline(ImageConfig.from_processor(processor, max_visual_tokens=None))
    print(f"images: {len(paths)} x {args.repeats} repeats, {source}; max_pixels={args.max_pixels}; "
          f"torch threads={torch.get_num_threads()}, pipeline workers={pipe.cfg.workers}")

    def baseline():
        outs = []
        for p in paths:
            with Image.open(p) as im:
                outs.append(processor(images=im.convert("RGB"), return_tensors="pt")["pixel_values"])
        return torch.cat(outs)

    def ours():
        reqs = [paths[i:i + args.batch] for i in range(0, len(paths), args.batch)]
        return pipe.process(reqs).pixel_values

    a, b = baseline(), ours()  # warm-up, and the equality check
    diff = (a - b).abs().max().item()
    print(f"outputs equal: max abs diff {diff:.2e} over {tuple(a.shape)}")
    times = {"one processor call per image": [], "adaptrubric pipeline": []}
    for _ in range(args.repeats):
        for name, fn in (("one processor call per image", baseline), ("adaptrubric pipeline", ours)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    print(f"machine: {machine()}")
    rates = {k: [len(paths) / t for t in v] for k, v in times.items()}
    for k, r in rates.items():
        print(f"{k:<32} images/s: median {spread(r, '.1f')}")
    ratios = [a / b for a, b in zip(rates["adaptrubric pipeline"], rates["one processor call per image"])]
    print(f"{'ratio per repeat':<32} median {spread(ratios)}")
    import statistics

    ratio = statistics.median(ratios)
    pipe.close()
    if diff > 1e-4:
        print("ERROR: outputs differ", file=sys.stderr)
        return 1
    print(f"ratio={ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
