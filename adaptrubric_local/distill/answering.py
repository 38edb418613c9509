"""A tiny Qwen3-VL that answers: the demo's distillation at its smallest, merged into one checkpoint,
so that verdicts and `p_success` can be compared across engines (a random tiny model never writes a
parseable verdict).

`answering_model` builds, offline on the CPU, a tiny random Qwen3-VL (`engine/tiny.py`), labelled
synthetic trajectories whose outcome shows on the final screen plus a no-outcome copy of each success
(`no_outcome_copies`), a correct teacher only `teacher_p` sure, a LoRA student trained with the
soft-label term (`distill/trainer.py`), then merges the adapter (`distill/evaluate.merge`). The result
answers the `--router rules --no-fine` verifier prompt with its SCORE read from the outcome banner and a
`p_success` near the teacher's, away from 0.5 and 0/1, so a numerical difference between engines shows;
`answering.json` records how it was made. Without the banner it scores 0; on real screenshots it writes
unparseable verdicts (docs/audit.md). Knows nothing about engines beyond the transformers one the
trainer and evaluator use.
"""
from __future__ import annotations

import contextlib
import json
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path


@dataclass
class TinyStudentSettings:
    """A tiny student distilled on the CPU: the synthetic data's size and the LoRA training."""

    n_tasks: int = 12
    candidates: int = 4
    size: tuple[int, int] = (96, 192)
    epochs: float = 8.0
    learning_rate: float = 5e-3
    lora_r: int = 16
    max_new_tokens: int = 24
    seed: int = 0


@dataclass
class AnsweringSettings(TinyStudentSettings):
    """How the answering tiny model is made (its build time: docs/benchmarks.md)."""

    teacher_p: float = 0.8  # the teacher's P(SCORE = its answer)
    no_outcome: bool = True  # also train on a copy of each success whose final screen shows no outcome, labelled 0


ELSEWHERE = ("It reads the outcome from the banner on the final screen and nothing else: a final screen without "
             "the banner (synth without --visible-outcome, the last screenshot replaced by an earlier one, the "
             "steps reversed) it scores 0 with a parsed verdict, whatever the label; the instruction and the "
             "agent's text do not move its verdict; on real screenshots it mostly writes unparseable verdicts "
             "(garbled lines up to the token cap). For comparing engines and tests, not for judging anything.")


def trained_on(s: AnsweringSettings) -> str:
    """What the model built with `s` was trained on, and the command that draws data like it."""
    w, h = s.size
    return (f"{s.n_tasks} tasks x {s.candidates} candidates of synthetic trajectories ({w}x{h}, seed {s.seed}) whose "
            "final screen is covered by the outcome banner (green 'Done' / red 'Not done'), labels as a teacher "
            f"{s.teacher_p:g} sure: what `adaptrubric synth --visible-outcome --size {w}x{h} --tasks {s.n_tasks} "
            f"--candidates {s.candidates} --seed {s.seed}` draws"
            + ("; and a copy of each success whose final screen is an earlier one, without the banner, labelled 0"
               if s.no_outcome else ""))


def no_outcome_copies(trajs, seed: int = 0) -> list:
    """For each success, a copy whose final screen shows no outcome, labelled 0 as a teacher that judges the
    final screen would (no completed task is visible at the end): in turn, the last screenshot replaced by an
    earlier screen of the same trajectory (the agent stopped before the outcome), or the steps in another
    order that does not end on the outcome screen (the agent saw it, then ended elsewhere). Ids are the
    original's with `~no-outcome`; task ids stay, so a copy lands in its original's train/val split; the
    screenshots are the original's files."""
    rng = random.Random(seed)
    out = []
    for k, t in enumerate(x for x in trajs if x.label == 1 and len(x.steps) >= 2):
        steps = list(t.steps)
        if k % 2 == 0:
            steps[-1] = replace(steps[-1], screenshot=steps[rng.randrange(len(steps) - 1)].screenshot)
        else:
            last = steps[-1]
            while steps[-1] is last:
                rng.shuffle(steps)
        out.append(replace(t, id=f"{t.id}~no-outcome", steps=steps, label=0))
    return out


def answering_data(out: str | Path, s: AnsweringSettings | None = None, seed: int | None = None,
                   n_tasks: int | None = None, candidates: int | None = None) -> Path:
    """Labelled synthetic trajectories drawn the way the answering model built with `s` was trained (its screen
    size, the outcome banner on each final screen) into `out`; returns the JSONL path. `seed` other than
    `s.seed` draws fresh data (the same tasks, other candidates' labels and screens; `n_tasks` above the
    build's adds new instructions of the same families). The same as `adaptrubric synth --visible-outcome
    --size WxH --tasks N --seed SEED`."""
    from ..synth import synthesize

    s = s or AnsweringSettings()
    return synthesize(Path(out), n_tasks=s.n_tasks if n_tasks is None else n_tasks,
                      candidates=s.candidates if candidates is None else candidates, size=s.size,
                      seed=s.seed if seed is None else seed, visible_outcome=True)


def answering_model(out: str | Path, s: AnsweringSettings | None = None, work: str | Path | None = None,
                    keep_adapter: bool = False, log=print) -> Path:
    """Build the answering tiny model into `out` (a checkpoint `--model` loads in either engine); returns
    `out`. `work` keeps the intermediate files (base model, data, adapter) there instead of in a
    temporary folder; `keep_adapter` copies the unmerged adapter to `out/adapter` (it trains lm_head
    fully, as the demo's student does)."""
    from ..dry_run import tokenizer_corpus
    from ..engine.tiny import make_tiny_model
    from ..formats import load_trajectories
    from .collect import CollectConfig, collect, label_teacher, teacher_pipeline
    from .config import TrainConfig
    from .evaluate import evaluate, merge
    from .train import train

    s = s or AnsweringSettings()
    out = Path(out)
    t0 = time.perf_counter()
    with (tempfile.TemporaryDirectory(prefix="adaptrubric-answering-", ignore_cleanup_errors=True) if work is None
          else contextlib.nullcontext(work)) as root:
        root = Path(root)
        base = make_tiny_model(root / "base", corpus=tokenizer_corpus(), seed=s.seed)
        data = answering_data(root / "synth", s)
        trajs = load_trajectories(data).trajectories
        if s.no_outcome:
            from ..formats import canonical

            trajs = trajs + no_outcome_copies(trajs, s.seed)
            data = data.with_name("train.jsonl")
            canonical.write(trajs, data)
        dist = root / "distill"
        shutil.rmtree(dist, ignore_errors=True)
        collect(data, dist, label_teacher(trajs, sure=s.teacher_p),
                teacher_pipeline("labels"), CollectConfig(val_fraction=0.25, seed=s.seed), progress=False)
        adapter = root / "student"
        shutil.rmtree(adapter, ignore_errors=True)
        summary = train(TrainConfig(
            data=str(dist), model=str(base), out=str(adapter), target="verdict", epochs=s.epochs,
            learning_rate=s.learning_rate, lora_r=s.lora_r, lora_alpha=2 * s.lora_r, per_device_batch_size=4,
            grad_accum=1, warmup_ratio=0.1, train_lm_head=True, gradient_checkpointing=False, logging_steps=50,
            seed=s.seed, progress=False, soft_labels=True, dataloader_workers=0))
        res = evaluate(dist, str(base), adapter, root / "eval", max_new_tokens=s.max_new_tokens, progress=False,
                       base=False)
        held_out = {k: row.get("adapter") for k, row in res["table"].items()}
        merge(str(base), adapter, out)
        if keep_adapter:
            shutil.copytree(adapter, out / "adapter", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("trainer", "*.jsonl"))
    record = {"settings": asdict(s), "trained_on": trained_on(s), "elsewhere": ELSEWHERE, "held_out": held_out["n"],
              "agreement_with_teacher": held_out["agreement_with_teacher"], "unparsed": held_out["unparsed"],
              "p_mae_vs_teacher": held_out["p_mae_vs_teacher"], "train_seconds": summary.get("seconds"),
              "seconds": time.perf_counter() - t0,
              "use": "adaptrubric score DATA --model THIS --router rules --no-fine "
                     f"--verify-max-new-tokens {s.max_new_tokens}",
              "matching_data": f"adaptrubric synth --out DIR --visible-outcome --size {s.size[0]}x{s.size[1]} "
                               "--seed S (a seed other than the build's for fresh data); in Python "
                               "adaptrubric_local.distill.answering.answering_data(DIR, seed=S)",
              "check": "python eval/answering_model.py --model THIS"}
    (out / "answering.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / "README.md").write_text(
        "Tiny Qwen3-VL built by `adaptrubric make-tiny-model --answering`: a random tiny model with a LoRA "
        f"student merged in, distilled from {trained_on(s)}. It answers the verifier prompt of "
        "`--router rules --no-fine` with the verdict lines on data drawn that way (any seed); its p_success "
        f"is near the teacher's. What it does elsewhere: {ELSEWHERE}\n")
    log(f"answering tiny model: held-out agreement {figure(record['agreement_with_teacher'])}, unparsed "
        f"{record['unparsed']}, |p_success - teacher| {figure(record['p_mae_vs_teacher'])}, "
        f"{record['seconds']:.0f} s -> {out}")
    return out


def figure(x) -> str:
    """A float with three decimals; anything else (an int, None, a string) as `str` writes it."""
    return f"{x:.3f}" if isinstance(x, float) else str(x)
