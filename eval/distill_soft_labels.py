"""Soft labels: does the student learn the teacher's confidence, not just its decision?

Synthetic trajectories whose outcome is visible on the final screen; a scripted teacher judges each
correctly but is only 80% sure: P(SCORE=1) = 0.8 when it says 1, 0.2 when it says 0 (recorded the
way a vLLM judge's SCORE-digit logprobs are). A tiny Qwen3-VL student is trained twice on the same
data and settings: with the distillation term (soft labels, the default) and without it (the
teacher's SCORE digit only). Both are scored on the held-out tasks through the normal scoring path
and compared with the teacher: agreement, and the mean absolute difference between the student's
p_success and the teacher's probability. Ends with one line per student.

    python eval/distill_soft_labels.py --out runs/soft-labels

Exits 1 when a figure cannot be computed (no held-out trajectory, no parsed verdict, hence no p_success)
or the figures are not the finding: the student trained with the term within 0.1 of the teacher's
probability and the one without it not (`check`; tests/test_distill_soft_labels.py runs it in the suite
at this size with 9 epochs, where the finding holds with the same margins).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TEACHER_P = {1: 0.8, 0: 0.2}


def teacher(trajs):
    """Correct decisions, 80% sure: the verdict lines of each trajectory's label, P(SCORE=1) 0.8/0.2."""
    from adaptrubric_local.distill.collect import label_block
    from adaptrubric_local.engine.fake import ScriptedEngine

    texts = {t.id: label_block(t.label) for t in trajs}
    return ScriptedEngine(script=lambda req: texts[req.tag], name="unsure-judge",
                      p_score=lambda req, digit: TEACHER_P[int(digit)])


def run(out: Path, epochs: float = 12.0, n_tasks: int = 12, seed: int = 0, progress: bool = False) -> dict:
    """Collect once, train with and without soft labels, evaluate both on the held-out tasks."""
    from adaptrubric_local.distill.collect import CollectConfig, collect, teacher_pipeline
    from adaptrubric_local.distill.config import TrainConfig
    from adaptrubric_local.distill.evaluate import evaluate
    from adaptrubric_local.distill.train import train
    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.tiny import make_tiny_model
    from adaptrubric_local.formats import load_trajectories
    from adaptrubric_local.synth import synthesize

    model = out / "tiny-qwen3-vl"
    if not (model / "config.json").is_file():
        make_tiny_model(model, corpus=tokenizer_corpus(), seed=seed)
    data = synthesize(out / "synth", n_tasks=n_tasks, candidates=4, size=(96, 192), seed=seed, visible_outcome=True)
    dist = out / "distill"
    shutil.rmtree(dist, ignore_errors=True)
    collect(data, dist, teacher(load_trajectories(data).trajectories), teacher_pipeline("labels"),
            CollectConfig(val_fraction=0.25, seed=seed), progress=progress)
    results = {}
    for name, soft in (("with_distillation_term", True), ("without", False)):
        ckpt = out / f"student-{name}"
        shutil.rmtree(ckpt, ignore_errors=True)
        cfg = TrainConfig(data=str(dist), model=str(model), out=str(ckpt), target="verdict", epochs=epochs,
                          learning_rate=5e-3, lora_r=16, lora_alpha=32, per_device_batch_size=4, grad_accum=1,
                          warmup_ratio=0.1, train_lm_head=True, gradient_checkpointing=False, logging_steps=5,
                          seed=seed, progress=progress, soft_labels=soft, dataloader_workers=0)
        summary = train(cfg)
        res = evaluate(dist, str(model), ckpt, out / f"eval-{name}", max_new_tokens=24, progress=progress, base=False)
        t = res["table"]
        ps = [p for p in res["runs"]["adapter"]["p_success"].values() if p is not None]
        results[name] = {"agreement": t["agreement_with_teacher"]["adapter"],
                         "p_mae_vs_teacher": t["p_mae_vs_teacher"]["adapter"],
                         "ece_vs_teacher": t["ece_vs_teacher"]["adapter"],
                         "mean_p_when_1": _mean([p for p in ps if p >= 0.5]),
                         "mean_p_when_0": _mean([p for p in ps if p < 0.5]),
                         "best_epoch": summary["best_epoch"], "held_out": t["n"]["adapter"]}
    (out / "soft_labels.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


def _mean(xs):
    return sum(xs) / len(xs) if xs else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", default="runs/soft-labels", help="working folder (default runs/soft-labels)")
    ap.add_argument("--epochs", type=float, default=12.0, help="training epochs (default 12)")
    ap.add_argument("--tasks", type=int, default=12, help="synthetic tasks, 4 candidates each (default 12)")
    args = ap.parse_args(argv)
    res = run(Path(args.out), args.epochs, args.tasks)
    for name, r in res.items():
        print(f"{name}: held-out {r['held_out']}, agreement {_f(r['agreement'])}, |p_success - teacher| "
              f"{_f(r['p_mae_vs_teacher'], 3)}, ECE vs teacher {_f(r['ece_vs_teacher'], 3)}, mean p_success "
              f"{_f(r['mean_p_when_1'])} when it says 1 / {_f(r['mean_p_when_0'])} when it says 0 "
              f"(teacher 0.80 / 0.20)")
    problems = check(res)
    if problems:
        print("CHECK FAILED: " + "; ".join(problems), file=sys.stderr)
        return 1
    return 0


def check(res: dict) -> list[str]:
    """What is wrong with a run's figures (empty when the finding holds)."""
    missing = [f"{name}: no {k}" for name, r in res.items() for k in ("agreement", "p_mae_vs_teacher", "ece_vs_teacher")
               if r[k] is None] + [f"{name}: no held-out trajectory" for name, r in res.items() if not r["held_out"]]
    if missing:
        return missing
    with_term, without = res["with_distillation_term"], res["without"]
    out = []
    if with_term["agreement"] < 1.0 or without["agreement"] < 0.9:
        out.append(f"the students did not learn the decision (agreement {with_term['agreement']:.2f} / "
                   f"{without['agreement']:.2f})")
    if not with_term["p_mae_vs_teacher"] < 0.1 < without["p_mae_vs_teacher"]:
        out.append(f"|p_success - teacher| {with_term['p_mae_vs_teacher']:.3f} with the term, "
                   f"{without['p_mae_vs_teacher']:.3f} without: the term should bring it under 0.1, and only it")
    return out


def _f(x, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


if __name__ == "__main__":
    sys.exit(main())
