#!/usr/bin/env python3
"""Model calls and tokens per trajectory for GRPO-style groups sharing an instruction.

Runs the full AdaptRubric pipeline (model router + fine cues + verifier) on the scripted fake
engine over generated groups of rollouts, with the route/cue cache on (the package's behaviour)
and off (a fresh cache per trajectory, as a pipeline without it would do). The paper reports 3.00
calls per trajectory (Table 5), i.e. router + cue + verifier for every trajectory.

Usage: python eval/calls_per_traj.py [--tasks 25] [--group 4] [--trajectories-per-batch 8]

Exits 1 unless the counts are the rule's: with the cache, exactly 1 + 2 x distinct instructions / n
calls per trajectory; without it, 3.00.
"""
import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from adaptrubric_local import AdaptRubric, FakeEngine, PipelineConfig, load_trajectories
from adaptrubric_local.synth import synthesize


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--tasks", type=int, default=25, help="number of tasks (synthetic; some share an instruction)")
    ap.add_argument("--group", type=int, default=4, help="rollouts per instruction (GRPO group size)")
    ap.add_argument("--trajectories-per-batch", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = synthesize(Path(tmp), n_tasks=args.tasks, candidates=args.group, size=(90, 200), seed=0)
        trajs = load_trajectories(path).trajectories
        cfg = PipelineConfig(router="model", trajectories_per_batch=args.trajectories_per_batch, dedupe_frames=False)
        cached = AdaptRubric(FakeEngine(), cfg)
        cached.score(trajs)
        uncached_calls = 0
        for t in trajs:
            fresh = AdaptRubric(FakeEngine(), cfg)
            fresh.score([t])
            uncached_calls += fresh.stats["calls"]
    s = cached.summary()
    n = len(trajs)
    distinct = len({t.instruction for t in trajs})
    print(f"trajectories: {n} ({args.tasks} tasks x {args.group} rollouts, {distinct} distinct instructions), "
          f"batch size {args.trajectories_per_batch}")
    print(f"floor with one router + one cue call per distinct instruction: {1 + 2 * distinct / n:.2f} calls/traj")
    print(f"calls by kind with cache: {s['calls_by_kind']}")
    print(f"{'':<22}{'calls/traj':>12}{'tokens/traj':>13}")
    print(f"{'without cache':<22}{uncached_calls / n:>12.2f}{'':>13}")
    print(f"{'with route/cue cache':<22}{s['calls_per_traj']:>12.2f}{s['tokens_per_traj']:>13.0f}")
    print(f"paper (Table 5):      {3.00:>12.2f}")
    print(f"ratio={uncached_calls / n / s['calls_per_traj']:.2f}")
    print(f"calls_per_traj={s['calls_per_traj']:.2f}")
    floor, cached = n + 2 * distinct, s["calls"]
    if cached != floor or uncached_calls != 3 * n:
        print(f"CHECK FAILED: {cached} calls with the cache (the rule gives {floor}), {uncached_calls} without "
              f"(the rule gives {3 * n})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
