"""The memory planner's table for docs/distillation.md: Qwen3-VL-4B/8B x LoRA/QLoRA x (native, 6,144, 3,072
visual tokens) on a reference trajectory, against 24/48/80 GB GPUs.

The reference trajectory is the paper's budget: 10 phone screenshots of 1080x2400 (native: 2,550
visual tokens each at Qwen3-VL's 32-pixel grid, 25,500 in all), 2,500 tokens of prompt text and a
`verdict` target (about 25 tokens). Settings are `distill train`'s defaults: LoRA r=16 on the language
model's linear layers, dropout 0.05, gradient checkpointing, one example per step, bf16. The sizes
come from the published configs (engine/architectures.py), counted on the meta device; no weight
is needed. What `distill plan DIR --model M` prints for your own data uses the same estimate.

    python eval/distill_plan_table.py
    python eval/distill_plan_table.py --check docs/distillation.md   # exit 1 when the page's copy is stale
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = ("Qwen/Qwen3-VL-4B-Instruct", "Qwen/Qwen3-VL-8B-Instruct")
BUDGETS = (None, 6144, 3072)
GPUS = (24, 48, 80)


def reference_shape(max_visual_tokens, frames: int = 10, size=(2400, 1080), text: int = 2500, target: int = 26):
    """The reference trajectory's lengths at a visual-token budget (None: native)."""
    from adaptrubric_local.distill.plan import Shape
    from adaptrubric_local.engine.images import ImageConfig, target_sizes
    from adaptrubric_local.engine.openai_engine import QWEN3VL_MAX_PIXELS, QWEN3VL_MIN_PIXELS

    cfg = ImageConfig(min_pixels=QWEN3VL_MIN_PIXELS, max_pixels=QWEN3VL_MAX_PIXELS,
                      max_visual_tokens=max_visual_tokens, workers=1)
    visual = sum(h * w // (32 * 32) for h, w in target_sizes([size] * frames, cfg))
    return Shape(text=text, visual=visual, target=target, images=frames)


def table() -> list[dict]:
    from adaptrubric_local.distill.plan import GiB, Setting, arch_of, estimate, fits
    from adaptrubric_local.engine.architectures import ARCHITECTURES, qwen3vl_config

    rows = []
    for name in MODELS:
        arch = arch_of(qwen3vl_config(ARCHITECTURES[name]))
        for quant in (False, True):
            for budget in BUDGETS:
                shape = reference_shape(budget)
                est = estimate(arch, Setting(load_in_4bit=quant), [shape])
                rows.append({"model": name.split("/")[-1], "method": "QLoRA" if quant else "LoRA",
                             "visual": "native" if budget is None else str(budget), "tokens": shape.total,
                             "gib": est.as_gib(), **{f"fits_{g}": fits(est, g * GiB) for g in GPUS}})
    return rows


def markdown(rows: list[dict]) -> str:
    head = ("| model | method | visual tokens | sequence | weights | LoRA+opt | activations | loss | peak (GiB) | "
            + " | ".join(f"{g} GB" for g in GPUS) + " |")
    lines = [head, "|" + "---|" * (9 + len(GPUS))]
    for r in rows:
        g = r["gib"]
        lines.append(f"| {r['model']} | {r['method']} | {r['visual']} | {r['tokens']:,} | {g['weights']:.1f} | "
                     f"{g['lora_optimizer']:.1f} | {g['activations']:.1f} | {g['loss']:.2f} | **{g['total']:.1f}** | "
                     + " | ".join("fits" if r[f"fits_{x}"] else "no" for x in GPUS) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--check", metavar="FILE", help="exit 1 unless FILE (docs/distillation.md) holds the table")
    args = ap.parse_args(argv)
    text = markdown(table())
    print(text)
    if args.check and text not in Path(args.check).read_text(encoding="utf-8"):
        print(f"CHECK FAILED: {args.check} does not hold the table above (the planner changed: copy it there)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
