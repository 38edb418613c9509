"""Generated tokens per trajectory and trajectories/s: a `verdict` student (three lines) vs a `full`
student (the teacher's reasoning, then the three lines), both distilled from the same teacher.

The teacher is scripted: a short reasoning paragraph that names what the final screen shows, then
the verdict block (the shape a large judge's answer has). Both students are LoRA adapters on the
tiny random Qwen3-VL, trained on the CPU the same way; then each scores the same trajectories with
the same token cap. Prints both sides and their ratio.

    python eval/bench_distill_tokens.py --out runs/bench-distill-tokens
    python eval/bench_distill_tokens.py --out /tmp/x --tasks 2 --epochs 1 --max-new-tokens 16   # seconds (CI)

Exits 1 when a trajectory got an error verdict or a student generated nothing (no ratio).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REASONING = ("The agent opened the app and worked through the steps. The final screen shows a {banner} banner, "
             "so the requested end state {verb} reached.\n")


def teacher_script(label_of):
    def script(req):
        ok = label_of[req.tag]
        return (REASONING.format(banner="green Done" if ok else "red Not done", verb="was" if ok else "was not")
                + f"SCORE: {ok}\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none")
    return script


def main(argv=None) -> int:
    from adaptrubric_local.distill.collect import CollectConfig, collect, teacher_pipeline
    from adaptrubric_local.distill.config import TrainConfig
    from adaptrubric_local.distill.train import train
    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.fake import ScriptedEngine
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig
    from adaptrubric_local.engine.tiny import make_tiny_model
    from adaptrubric_local.formats import load_trajectories
    from adaptrubric_local.pipeline import AdaptRubric
    from adaptrubric_local.synth import synthesize

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", default="runs/bench-distill-tokens")
    ap.add_argument("--tasks", type=int, default=16, help="synthetic tasks x4 candidates (default 16)")
    ap.add_argument("--epochs", type=float, default=8.0, help="training epochs (default 8)")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="token cap when scoring (default 128)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    model = out / "tiny"
    if not (model / "config.json").is_file():
        make_tiny_model(model, corpus=tokenizer_corpus())
    data = synthesize(out / "synth", n_tasks=args.tasks, candidates=4, size=(96, 192), visible_outcome=True)
    trajs = load_trajectories(data).trajectories
    teacher = ScriptedEngine(script=teacher_script({t.id: t.label for t in trajs}), name="scripted-judge")
    dist = out / "distill"
    if not (dist / "manifest.json").is_file():
        collect(data, dist, teacher, teacher_pipeline("labels"), CollectConfig(val_fraction=0.25), progress=False)
    rows, errors = {}, []
    for target in ("verdict", "full"):
        ckpt = out / f"student-{target}"
        if not (ckpt / "adapter_model.safetensors").is_file():
            train(TrainConfig(data=str(dist), model=str(model), out=str(ckpt), target=target, epochs=args.epochs,
                              learning_rate=5e-3, lora_r=16, lora_alpha=32, per_device_batch_size=4, grad_accum=1,
                              warmup_ratio=0.1, train_lm_head=True, gradient_checkpointing=False, progress=False))
        engine = HFEngine(HFEngineConfig(model=str(model), adapter=str(ckpt), max_new_tokens=args.max_new_tokens))
        pipe = AdaptRubric(engine, teacher_pipeline("labels", verify_max_new_tokens=args.max_new_tokens))
        pipe.score(trajs[:8])  # warm-up
        pipe.stats.clear()
        t0 = time.perf_counter()
        verdicts = pipe.score(trajs)
        secs = time.perf_counter() - t0
        engine.close()
        errors += [f"{target}: {v.id}: {v.error}" for v in verdicts if v.status == "error"]
        rows[target] = {"tokens": sum(v.completion_tokens for v in verdicts) / len(verdicts),
                        "traj_s": len(verdicts) / secs,
                        "parsed": sum(v.status == "ok" for v in verdicts) / len(verdicts),
                        "acc": sum(v.score == t.label for v, t in zip(verdicts, trajs)) / len(verdicts)}
    print(f"{'student':<10}{'gen tokens/traj':>18}{'traj/s':>10}{'parsed':>9}{'acc':>7}")
    for k, r in rows.items():
        print(f"{k:<10}{r['tokens']:>18.1f}{r['traj_s']:>10.2f}{r['parsed']:>9.2f}{r['acc']:>7.2f}")
    v, f = rows["verdict"], rows["full"]
    if errors or not v["tokens"] or not f["traj_s"]:
        print("CHECK FAILED: " + ("; ".join(errors[:3]) or "a student generated no tokens: no ratio"), file=sys.stderr)
        return 1
    print(f"ratio full/verdict: tokens x{f['tokens'] / v['tokens']:.2f}, "
          f"verdict/full traj/s x{v['traj_s'] / f['traj_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
