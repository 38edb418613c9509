"""Train a LoRA (or QLoRA) student on a distillation folder, with transformers' Trainer and peft.

Reads top to bottom: the examples and the memory plan (which stops a run that would not fit or
holds examples over `max_seq_len`, before any weight is loaded), the student (loaded through the
scoring engine, so inputs are built exactly as at scoring time, at the training image settings),
the adapter, the Trainer (loss in `trainer.py`: logits only at labelled positions, soft labels at
the SCORE digit; validation each epoch measures agreement with the teacher and keeps the best
epoch), then the adapter folder: `adapter_config.json` + `adapter_model.safetensors` (standard
peft), `image_policy.json` and `base_quantisation.json` (what `score --adapter` adopts: the images
the student was trained to see, the base quantisation it was trained on), `training_config.json`,
`loss_log.jsonl`, `train_summary.json` and a model card `README.md`. Epoch checkpoints go to
`OUT/trainer/`; `resume=True` continues from the last one. One GPU, several through
`accelerate launch` / `torchrun` (data parallel), or the CPU for tests.

    python -m adaptrubric_local.distill.train DIR --model Qwen/Qwen3-VL-4B-Instruct --out checkpoints/judge
    accelerate launch --num_processes 4 -m adaptrubric_local.distill.train DIR --model M --out checkpoints/judge
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from ..flags import Parser
from .config import CLASS_WEIGHTS, DTYPES, TARGETS, TrainConfig, config_from_args
from .examples import Example, examples, read_split
from .plan import LANGUAGE_LINEAR, VISION_LINEAR, GiB, cpu_runtime_bytes, format_plan, plan_training, refusal


# ----------------------------------------------------------------------------- 1. examples and plan
def class_weights(exs: list[Example], mode: str) -> None:
    """`balanced`: weight verifier examples inversely to the frequency of the teacher's SCORE."""
    if mode != "balanced":
        return
    counts = Counter(e.teacher_score for e in exs if e.kind == "verify")
    n = sum(counts.values())
    for e in exs:
        if e.kind == "verify" and counts.get(e.teacher_score):
            e.weight = n / (len(counts) * counts[e.teacher_score])


def datasets(cfg: TrainConfig) -> tuple[list[Example], list[Example]]:
    """(train, val) examples; val is empty without a val split."""
    train = examples(read_split(cfg.data, "train"), cfg.data, cfg.target, cfg.tasks)
    if not train:
        raise ValueError(f"{cfg.data}/train.jsonl gives no examples for tasks {','.join(cfg.tasks)}")
    val = (examples(read_split(cfg.data, "val"), cfg.data, cfg.target, cfg.tasks)
           if (Path(cfg.data) / "val.jsonl").is_file() else [])
    class_weights(train, cfg.class_weight)
    return train, val


def make_plan(cfg: TrainConfig, train: list[Example], device: str | None = None) -> dict:
    """The memory plan of `cfg` on its training examples (no weight is loaded), for `device` (default:
    this machine's). The processor and model config come without the weights: the model's files, or for
    a published Qwen3-VL id not in the local cache the package's copy of its values (engine/published.py),
    so a plan needs no download."""
    import torch

    from ..engine.encoding import Encoder
    from ..engine.images import ImageConfig
    from ..engine.published import config_and_processor
    from .plan import parse_memory

    processor, mconfig, source = config_and_processor(cfg.model)
    overrides = {"max_visual_tokens": cfg.max_visual_tokens, "workers": 1}
    if cfg.max_pixels:
        overrides["max_pixels"] = cfg.max_pixels
    image_cfg = ImageConfig.from_processor(processor.image_processor, **overrides)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    runtime = cpu_runtime_bytes() if device == "cpu" else 0.0
    # bytes of GPU memory to plan for: --gpu-memory, else the GPU present, else none (CPU)
    budget = (parse_memory(cfg.gpu_memory) if cfg.gpu_memory else
              float(torch.cuda.get_device_properties(0).total_memory) if torch.cuda.is_available() else None)
    plan = plan_training(cfg, train, Encoder(processor), image_cfg, mconfig, device, budget, runtime)
    return {**plan, "shapes_from": source}


# ----------------------------------------------------------------------------- 2. student and adapter
def load_student(cfg: TrainConfig):
    """The scoring engine on the base model (its encoder builds the inputs) with a fresh LoRA on it.
    The vision tower stays frozen unless `train_vision`; QLoRA keeps the non-quantised weights in the
    compute dtype (peft's prepare_model_for_kbit_training would upcast embeddings, head and vision tower
    to float32)."""
    import torch
    from peft import LoraConfig, get_peft_model

    from ..engine.hf import HFEngine, HFEngineConfig

    local_rank = int(os.environ.get("LOCAL_RANK", "-1"))
    device_map = {"": local_rank} if torch.cuda.is_available() and local_rank >= 0 else (
        "auto" if torch.cuda.is_available() else None)
    engine = HFEngine(HFEngineConfig(model=cfg.model, dtype=cfg.dtype, device_map=device_map,
                                     load_in_4bit=cfg.load_in_4bit, max_visual_tokens=cfg.max_visual_tokens,
                                     max_pixels=cfg.max_pixels, attn_implementation="sdpa", image_workers=2))
    model = engine.model
    model.config.use_cache = False
    for p in model.parameters():
        p.requires_grad_(False)
    targets = LANGUAGE_LINEAR if not cfg.train_vision else f"({LANGUAGE_LINEAR})|({VISION_LINEAR})"
    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout, target_modules=targets,
                      modules_to_save=["lm_head"] if cfg.train_lm_head else None, bias="none", task_type="CAUSAL_LM")
    return engine, get_peft_model(model, lora)


# ----------------------------------------------------------------------------- 3. trainer
def _callbacks(out: Path, cfg: TrainConfig):
    from transformers import EarlyStoppingCallback, TrainerCallback

    class Participation(TrainerCallback):
        """Each process records the batches it trained on (how a multi-process run shows every
        rank took part)."""

        def __init__(self):
            self.batches = 0

        def on_step_end(self, args, state, control, **kw):
            self.batches += 1

        def on_train_end(self, args, state, control, **kw):
            if args.world_size > 1:
                d = out / "processes"
                d.mkdir(parents=True, exist_ok=True)
                (d / f"rank-{args.process_index}.json").write_text(json.dumps(
                    {"rank": args.process_index, "world_size": args.world_size, "optimizer_steps": self.batches,
                     "pid": os.getpid()}) + "\n")

    cbs = [Participation()]
    if cfg.early_stopping_patience:
        cbs.append(EarlyStoppingCallback(early_stopping_patience=cfg.early_stopping_patience))
    return cbs


def training_args(cfg: TrainConfig, out: Path, has_val: bool):
    """TrainingArguments: an evaluation and a checkpoint per epoch, the best epoch kept."""
    import torch
    from transformers import TrainingArguments

    cuda = torch.cuda.is_available()
    metric = "selection" if "verify" in cfg.tasks else "loss"
    # gradient checkpointing, non-reentrant, under the names this transformers has (5.24: activation_checkpointing)
    ckpt = ("activation_checkpointing" if "activation_checkpointing" in TrainingArguments.__dataclass_fields__
            else "gradient_checkpointing")
    return TrainingArguments(
        output_dir=str(out / "trainer"), num_train_epochs=cfg.epochs, learning_rate=cfg.learning_rate,
        warmup_steps=cfg.warmup_ratio, per_device_train_batch_size=cfg.per_device_batch_size,
        per_device_eval_batch_size=cfg.per_device_batch_size, gradient_accumulation_steps=cfg.grad_accum,
        eval_strategy="epoch" if has_val else "no", save_strategy="epoch", save_total_limit=cfg.save_total_limit,
        load_best_model_at_end=has_val, metric_for_best_model=metric if has_val else None,
        greater_is_better=(metric == "selection") if has_val else None,
        logging_steps=cfg.logging_steps, logging_first_step=True, report_to=[], remove_unused_columns=False,
        **{ckpt: cfg.gradient_checkpointing,
           f"{ckpt}_kwargs": {"use_reentrant": False} if cfg.gradient_checkpointing else None}, use_cpu=not cuda,
        bf16=cuda and cfg.dtype in ("auto", "bf16") and torch.cuda.is_bf16_supported(),
        seed=cfg.seed, dataloader_num_workers=(2 if cuda else 0) if cfg.dataloader_workers is None
        else cfg.dataloader_workers, disable_tqdm=not cfg.progress,
        ddp_find_unused_parameters=False, label_names=["labels"])


def train(cfg: TrainConfig, metrics_fn: Callable | None = None) -> dict:
    """Plan, train, save the adapter folder (best epoch), return the run's numbers. `metrics_fn`
    replaces the validation metrics (agreement with the teacher) the best epoch is chosen by."""
    import torch

    from .card import write_model_card
    from .examples import Collator
    from .image_policy import write_policy, write_quantisation
    from .trainer import DistillTrainer, LossConfig, agreement_metrics

    out = Path(cfg.out)
    train_ex, val_ex = datasets(cfg)
    plan = make_plan(cfg, train_ex)
    print(format_plan(plan), file=sys.stderr)
    why = refusal(plan)
    if why and (plan["too_long"] or not cfg.force):
        raise ValueError(why)
    out.mkdir(parents=True, exist_ok=True)
    engine, model = load_student(cfg)
    tok = engine.tokenizer
    trainer = DistillTrainer(
        model=model, args=training_args(cfg, out, bool(val_ex)), train_dataset=train_ex,
        eval_dataset=val_ex or None, callbacks=_callbacks(out, cfg),
        data_collator=Collator(engine.encoder, engine.images.cfg), compute_metrics=metrics_fn or agreement_metrics,
        loss=LossConfig(cfg.soft_labels, cfg.kd_weight, cfg.score_token_weight),
        digit_ids=(tok.convert_tokens_to_ids("0"), tok.convert_tokens_to_ids("1")), image_config=engine.images.cfg,
        lengths=plan.get("example_lengths"), group_by_length=cfg.group_by_length)
    if not cfg.progress:  # without bars the Trainer prints each log dict on stdout (its PrinterCallback)
        from transformers import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    t0 = time.perf_counter()
    resume = cfg.resume and any((out / "trainer").glob("checkpoint-*"))
    result = trainer.train(resume_from_checkpoint=True if resume else None)
    seconds = time.perf_counter() - t0
    # ------------------------------------------------------------------------- 4. the adapter folder
    state = trainer.state
    keep = ("epoch", "eval_loss", "eval_agreement", "eval_p_mae", "eval_response_loss", "eval_selection")
    per_epoch = [{k: h[k] for k in keep if k in h} for h in state.log_history if "eval_loss" in h]
    best = next((m for m in per_epoch if m.get(f"eval_{trainer.args.metric_for_best_model}") == state.best_metric),
                None) if val_ex else None
    summary = {"train_examples": len(train_ex), "val_examples": len(val_ex), "train_loss": result.training_loss,
               "eval_loss": best.get("eval_loss") if best else (per_epoch[-1]["eval_loss"] if per_epoch else None),
               "epochs": cfg.epochs, "optimizer_steps": state.global_step, "seconds": seconds,
               "samples_per_s": len(train_ex) * cfg.epochs / seconds if seconds else None,
               "world_size": trainer.args.world_size, "resumed": bool(resume), "per_epoch": per_epoch,
               "best_epoch": best.get("epoch") if best else None, "best_metric": state.best_metric,
               "best_metric_name": trainer.args.metric_for_best_model, "best_checkpoint": state.best_model_checkpoint,
               "soft_label_examples": sum(e.teacher_p is not None for e in train_ex),
               "peak_gpu_memory_gib": torch.cuda.max_memory_allocated() / GiB if torch.cuda.is_available() else None,
               "plan": {k: plan[k] for k in ("estimate_gib", "lengths", "fits", "budget_gib", "device")}}
    if trainer.is_world_process_zero():
        trainer.model.save_pretrained(str(out))
        (out / "training_config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")
        manifest = json.loads((Path(cfg.data) / "manifest.json").read_text())
        write_policy(out, {"max_visual_tokens": cfg.max_visual_tokens, "max_pixels": cfg.max_pixels,
                           "max_images": manifest.get("pipeline", {}).get("max_images")})
        qc = getattr(engine.model.config, "quantization_config", None)  # what loading used, for the reader
        qc = qc.to_dict() if hasattr(qc, "to_dict") else qc
        write_quantisation(out, cfg.load_in_4bit, **({"bitsandbytes": json.loads(json.dumps(qc, default=str))}
                                                     if qc else {}))
        with open(out / "loss_log.jsonl", "w") as fh:
            fh.writelines(json.dumps(h) + "\n" for h in state.log_history)
        (out / "train_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        write_model_card(out, cfg, summary)
    engine.close()
    return summary


def dry_run(cfg: TrainConfig) -> dict:
    """The memory plan alone (`distill plan` / `distill train --dry-run`); with --gpu-memory, for a GPU
    of that size even on a machine without one (where the plan is made before renting it)."""
    train_ex, _ = datasets(cfg)
    return make_plan(cfg, train_ex, device="cuda" if cfg.gpu_memory else None)


def add_train_args(p: argparse.ArgumentParser) -> None:
    """DIR, --config, and one flag per TrainConfig field (a config file's value when not given)."""
    from ..flags import add_config_arguments

    p.add_argument("data", help="distillation folder (from `adaptrubric distill collect`)")
    p.add_argument("--config", help="YAML file of TrainConfig fields (see training/*.yaml); flags given override it")
    add_config_arguments(p, TrainConfig, hide_defaults=True,
                         choices={"target": list(TARGETS), "class_weight": list(CLASS_WEIGHTS),
                                  "dtype": list(DTYPES)})


def main(argv=None) -> int:
    ap = Parser(prog="python -m adaptrubric_local.distill.train", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_train_args(ap)
    ap.add_argument("--dry-run", action="store_true", help="print the memory plan and stop")
    args = ap.parse_args(argv)
    try:
        cfg = config_from_args(args)
        if args.dry_run:
            print(format_plan(dry_run(cfg)))
            return 0
        summary = train(cfg)
    except ValueError as exc:
        print(f"train: error: {exc}", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") == "0":
        print(json.dumps(summary, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
