"""Distillation end to end on the CPU: data, collect, train, evaluate, then reload through the
scoring CLI (`adaptrubric score --adapter`).

Synthetic trajectories whose outcome is visible on the final screen; the data's labels are the
teacher; a tiny random Qwen3-VL is the student (LoRA, a few epochs). Prints base vs adapter on the
held-out tasks, checks that `adaptrubric score --adapter` gives the same predictions as the
evaluation did, and ends with one line:
    agreement_base=<fraction> agreement_adapter=<fraction>
Exit status 1 if the adapter agrees on fewer than --min-agreement (90%) of held-out trajectories or the
reload differs.

    python eval/distill_demo.py --out runs/distill-demo
    python eval/distill_demo.py --tasks 4 --epochs 2 --min-agreement 0   # the plumbing and the reload check (CI;
                                                                        # `make demo` checks the learning)
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # training/ and the package from a checkout


def main(argv=None) -> int:
    from adaptrubric_local.cli import main as cli_main
    from adaptrubric_local.cli.demo import DemoSettings, distill_demo

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", default="runs/distill-demo", help="working folder (default runs/distill-demo)")
    ap.add_argument("--tasks", type=int, default=16, help="synthetic tasks (x4 candidates; default 16)")
    ap.add_argument("--epochs", type=float, default=8.0, help="training epochs (default 8)")
    ap.add_argument("--min-agreement", type=float, default=0.9,
                    help="held-out agreement the adapter must reach (default 0.9)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    s = DemoSettings(n_tasks=args.tasks, epochs=args.epochs)
    res = distill_demo(Path(args.out), s)

    # reload through the scoring path: the CLI's `score --adapter`, the pipeline settings of the collection
    verdicts = Path(args.out) / "score_adapter.jsonl"
    if verdicts.exists():
        verdicts.unlink()
    t1 = time.perf_counter()
    rc = cli_main(["score", res["data"], "--model", res["model"], "--adapter", res["adapter"], "--out", str(verdicts),
                   "--router", "rules", "--no-fine", "--verify-max-new-tokens", str(s.max_new_tokens), "--quiet"])
    if rc != 0:
        print(f"adaptrubric score exited with {rc}", file=sys.stderr)
        return 1
    scored = {json.loads(x)["id"]: json.loads(x)["score"] for x in verdicts.read_text().splitlines() if x.strip()}
    expected = res["predictions"]
    same = sum(scored.get(i) == p for i, p in expected.items())
    print(f"reload via `adaptrubric score --adapter`: {same}/{len(expected)} held-out predictions identical "
          f"({time.perf_counter() - t1:.0f} s for all {len(scored)} trajectories)")
    times = {k: round(v, 1) for k, v in res["times"].items()}
    print(f"times (s): {json.dumps(times)}  total {time.perf_counter() - t0:.0f}")
    agr = res["table"]["agreement_with_teacher"]
    print(f"agreement_base={agr['base']:.3f} agreement_adapter={agr['adapter']:.3f}")
    if agr["adapter"] < args.min_agreement or same != len(expected):
        print(f"CHECK FAILED: adapter agreement {agr['adapter']:.3f} (at least {args.min_agreement} wanted), "
              f"{same}/{len(expected)} identical after reloading", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
