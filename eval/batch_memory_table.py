#!/usr/bin/env python3
"""How many rows of a 10-phone-frame trajectory one generate call of the verifier can hold, per GPU size
and attention implementation: the arithmetic of the engine's memory model (engine/memory.py, checked
against measured peaks by `eval/prefill_memory.py`) for docs/engines.md.

A row is the reference trajectory of `eval/distill_plan_table.py`: 10 screenshots of 1080x2400 at the
processor's native resolution (25,500 visual tokens) or at the 6,144-token budget (5,760), 2,500 tokens
of prompt text, and the verifier's 1,024-token cap of new tokens (which the KV cache must hold). Free
memory is the card's less the bf16 weights (counted on the meta device from the published config) and
1.5 GiB for the CUDA context and allocator slack; groups may fill 85% of it (the engine's
GPU_MEMORY_FRACTION). Rows are left-padded (a real group's rows differ in length), which is what makes
transformers' SDPA path build its (B, 1, L, L) mask. The engine also caps a group at --max-batch-size
(16).

    python eval/batch_memory_table.py            # the table of docs/engines.md (markdown)
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = ("Qwen/Qwen3-VL-4B-Instruct", "Qwen/Qwen3-VL-8B-Instruct")
GPUS_GB = (24, 48, 80, 141)
PATHS = ("sdpa", "sdpa_padded_prefill", "flash_attention_2")
NEW_TOKENS = 1024


def table() -> list[dict]:
    from distill_plan_table import reference_shape

    from adaptrubric_local.distill.plan import GPU_RESERVE, Setting, arch_of, weights_bytes
    from adaptrubric_local.engine import memory
    from adaptrubric_local.engine.architectures import ARCHITECTURES, qwen3vl_config

    rows = []
    for name in MODELS:
        config = qwen3vl_config(ARCHITECTURES[name])
        sizes, weights = memory.Sizes.of(config), weights_bytes(arch_of(config), Setting())  # bf16
        for budget in (None, 6144):
            shape = reference_shape(budget)
            tokens = shape.text + shape.visual
            for attn in PATHS:
                one = memory.estimate(sizes, memory.Group([tokens], [shape.visual], NEW_TOKENS), attn).total
                fit = {}
                for gb in GPUS_GB:
                    free = gb * memory.GiB - weights - GPU_RESERVE  # the CUDA context
                    fit[gb] = memory.rows_that_fit(sizes, tokens, shape.visual, NEW_TOKENS, attn, 2,
                                                   memory.free_budget(free))
                rows.append({"model": name, "visual": "native" if budget is None else str(budget), "tokens": tokens,
                             "attn": attn, "weights_gib": weights / memory.GiB, "one_row_gib": one / memory.GiB,
                             "rows": fit})
    return rows


def markdown(rows: list[dict]) -> str:
    head = ("| model | visual tokens | row tokens | attention | weights (GiB) | one row (GiB) | "
            + " | ".join(f"{g} GB" for g in GPUS_GB) + " |")
    lines = [head, "|" + "---|" * (6 + len(GPUS_GB))]
    for r in rows:
        lines.append(f"| {r['model'].split('/')[-1]} | {r['visual']} | {r['tokens']:,} | {r['attn']} | "
                     f"{r['weights_gib']:.1f} | {r['one_row_gib']:.2f} | "
                     + " | ".join(str(r["rows"][g]) for g in GPUS_GB) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.parse_args(argv)
    os.environ.pop("TRANSFORMERS_SDPA_FORCE_GQA", None)  # CUDA's rule: K/V repeated whenever there is a mask
    print(markdown(table()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
