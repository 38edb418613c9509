#!/usr/bin/env python3
"""Scoring throughput on the tiny random Qwen3-VL: batch size 1 vs batched, from one run.

Builds the tiny model and a synthetic set, then scores the same trajectories twice through the full
pipeline (rules router, fine cues, context selection, image pipeline, generation, parsing): once
with GPU batches of 1, once with batches of --max-batch-size. Both use the same token caps, so the
outputs are compared too (they must be identical). Prints trajectories/s both ways, calls and
tokens per trajectory, and ends with `ratio=<median speed-up>`; with --repeats the timed pass
runs several times and the report gives the median with its min-max spread and the machine.

256 new tokens is the verifier's cap (and the GPU benchmark's fixed length). On 2 CPU cores with a
2-layer model the decode loop batches well (per-step overhead is shared) but a padded batch's
prefill does not: any padding mask moves SDPA off its causal fast path (about 3.7x slower per row
here), so the ratio grows with the output length. On a GPU the batching gain comes from sharing
weight reads, which this toy model cannot show; gpu_bench.py measures that.

What is machine-dependent: the batch-1 side is bound by Python and per-call overhead (a faster
core speeds it up more than the batched side), the batched side by the 2 cores' matmul throughput
and by other processes on them; so the ratio drops on a machine with faster single cores (1.6-1.9x
was measured on another machine of this kind, 3.7-4.1x on this one at an earlier revision).

Both sides use the rules router (the model router's cost is the same either way and only dilutes
the comparison) and the 6144 visual-token budget (the tiny model's frames are small anyway).

Usage: python eval/bench_score.py [--trajectories 24] [--max-batch-size 16] [--max-new-tokens 256] [--repeats 3]
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine, spread


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trajectories", type=int, default=24)
    ap.add_argument("--max-batch-size", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3, help="timed passes per side (median reported)")
    args = ap.parse_args()
    import statistics

    from adaptrubric_local import AdaptRubric, PipelineConfig, load_trajectories
    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig
    from adaptrubric_local.engine.tiny import make_tiny_model
    from adaptrubric_local.synth import synthesize

    tmp = Path(tempfile.mkdtemp())
    model = make_tiny_model(tmp / "tiny", corpus=tokenizer_corpus())
    candidates = 4
    data = synthesize(tmp / "synth", n_tasks=max(1, args.trajectories // candidates), candidates=candidates,
                      size=(360, 800))
    trajs = load_trajectories(data).trajectories
    results = {}
    for bs in (1, args.max_batch_size):
        engine = HFEngine(HFEngineConfig(model=str(model), max_batch_size=bs, max_new_tokens=args.max_new_tokens,
                                         max_visual_tokens=6144))
        cfg = PipelineConfig(router="rules", trajectories_per_batch=max(4 * bs, 8),
                             verify_max_new_tokens=args.max_new_tokens, cue_max_new_tokens=args.max_new_tokens)
        AdaptRubric(engine, cfg).score(trajs[:4])  # warm-up (kernels, caches) on a few
        rates = []
        for _ in range(args.repeats):  # a fresh pipeline each pass: the cue cache would favour later passes
            pipe = AdaptRubric(engine, cfg)
            t0 = time.perf_counter()
            verdicts = pipe.score(trajs)
            rates.append(len(trajs) / (time.perf_counter() - t0))
        results[bs] = (rates, pipe.summary(), [v.raw for v in verdicts])
        engine.close()
    print(f"tiny Qwen3-VL (random weights), {len(trajs)} synthetic trajectories, CPU, "
          f"max_new_tokens={args.max_new_tokens}")
    print(f"machine: {machine()}")
    print(f"{'GPU batch size':<16}{'traj/s: median (min-max)':>30}{'calls/traj':>12}{'tokens/traj':>13}")
    for bs, (rates, s, _) in results.items():
        print(f"{bs:<16}{spread(rates):>30}{s['calls_per_traj']:>12.2f}{s['tokens_per_traj']:>13.0f}")
    ratios = [b / a for a, b in zip(results[1][0], results[args.max_batch_size][0])]
    print(f"ratio per pass: median {spread(ratios)}")
    same = sum(a == b for a, b in zip(results[1][2], results[args.max_batch_size][2]))
    print(f"identical outputs batched vs batch 1: {same}/{len(trajs)}")
    print(f"ratio={statistics.median(ratios):.2f}")
    return 0 if same == len(trajs) else 1


if __name__ == "__main__":
    sys.exit(main())
