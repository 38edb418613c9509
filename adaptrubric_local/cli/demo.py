"""The product on a CPU: synthetic trajectories whose outcome is visible on screen,
a tiny Qwen3-VL student distilled from their labels with LoRA, then scoring and evaluation of the
held-out tasks with the adapter (and the base model beside it), so the report has real numbers and
plots. `run_demo(out)` is what `make demo` runs; `distill_demo(...)` is the parameterised flow that
`eval/distill_demo.py` runs larger. Knows nothing about argument parsing.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ..distill.answering import TinyStudentSettings, figure


@dataclass
class DemoSettings(TinyStudentSettings):
    """Sizes and training settings of a demo run (the defaults are `make demo`'s)."""

    val_fraction: float = 0.25
    batch_size: int = 4
    score_token_weight: float = 4.0  # the deciding digit weighs more than the 20 format tokens around it


def distill_demo(out: str | Path, s: DemoSettings | None = None, progress: bool = False, log=print) -> dict:
    """Synth -> collect (labels as teacher) -> train a tiny student -> evaluate base vs adapter."""
    from ..distill.collect import CollectConfig, collect, label_teacher, teacher_pipeline
    from ..distill.config import TrainConfig
    from ..distill.evaluate import evaluate
    from ..distill.train import train
    from ..dry_run import tokenizer_corpus
    from ..engine.tiny import make_tiny_model
    from ..formats import load_trajectories
    from ..synth import synthesize

    s = s or DemoSettings()
    out = Path(out)
    times = {}
    t0 = time.perf_counter()
    model = out / "tiny-qwen3-vl"
    if not (model / "config.json").is_file():
        make_tiny_model(model, corpus=tokenizer_corpus(), seed=s.seed)
    data = synthesize(out / "synth", n_tasks=s.n_tasks, candidates=s.candidates, size=s.size, seed=s.seed,
                      visible_outcome=True)
    times["data_s"] = time.perf_counter() - t0
    log(f"data: {s.n_tasks * s.candidates} synthetic trajectories (outcome banner on the final screen) -> {data}")

    t0 = time.perf_counter()
    dist = out / "distill"
    if dist.exists():
        shutil.rmtree(dist)
    manifest = collect(data, dist, label_teacher(load_trajectories(data).trajectories), teacher_pipeline("labels"),
                       CollectConfig(val_fraction=s.val_fraction, seed=s.seed), progress=progress)
    times["collect_s"] = time.perf_counter() - t0
    c = manifest["counts"]
    log(f"collect: teacher = the data's labels; train {c['train']} / val {c['val']} trajectories (split by task)")

    t0 = time.perf_counter()
    ckpt = out / "checkpoints" / "tiny-student"
    cfg = TrainConfig(data=str(dist), model=str(model), out=str(ckpt), target="verdict", epochs=s.epochs,
                      learning_rate=s.learning_rate, lora_r=s.lora_r, lora_alpha=2 * s.lora_r,
                      per_device_batch_size=s.batch_size, grad_accum=1, warmup_ratio=0.1, train_lm_head=True,
                      gradient_checkpointing=False, logging_steps=5, seed=s.seed, progress=progress,
                      score_token_weight=s.score_token_weight, dataloader_workers=0)
    summary = train(cfg)
    times["train_s"] = time.perf_counter() - t0
    log(f"train: LoRA r={s.lora_r} (+lm_head: the tiny model's head is random) for {s.epochs:g} epochs, "
        f"{summary['seconds']:.0f} s, val loss {summary['eval_loss']:.3f} -> {ckpt}")

    t0 = time.perf_counter()
    res = evaluate(dist, str(model), ckpt, out / "eval", max_new_tokens=s.max_new_tokens, progress=progress)
    times["evaluate_s"] = time.perf_counter() - t0
    table = res["table"]
    log("evaluate (held-out tasks):")
    for k in ("agreement_with_teacher", "acc", "f1", "unparsed"):
        log(f"  {k:<24} base {figure(table[k].get('base'))}   adapter {figure(table[k].get('adapter'))}")
    log(f"report: {out / 'eval' / 'adapter' / 'report.md'} (plots beside it); side by side: "
        f"{out / 'eval' / 'comparison.md'}")
    log(f"review every trajectory in a browser: {out / 'eval' / 'adapter' / 'review.html'}")
    result = {"model": str(model), "data": str(data), "distill": str(dist), "adapter": str(ckpt),
              "eval": str(out / "eval"), "table": table, "times": times, "train": summary,
              "predictions": res["runs"]["adapter"]["predictions"]}
    (out / "demo.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result


def run_demo(out: Path, verbose: bool = False) -> int:
    """`make demo`: the distillation flow at its smallest; 0 when the adapter agrees with the labels on at
    least 90% of the held-out trajectories. `verbose` (`--verbose demo`): progress bars and trainer logs too."""
    print("== DEMO: a tiny random Qwen3-VL, distilled on the CPU from labelled synthetic trajectories whose ==")
    print("== outcome is visible on the final screen; then scored and evaluated on held-out tasks.         ==\n")
    res = distill_demo(out, progress=verbose)
    agr = res["table"]["agreement_with_teacher"]
    print(f"\nagreement_base={agr.get('base', 0):.3f} agreement_adapter={agr['adapter']:.3f}")
    return 0 if agr["adapter"] >= 0.9 else 1
