"""Train a LoRA (or QLoRA) student on a distillation folder, with transformers' Trainer and peft.

Reads top to bottom: the config, the student (loaded through the scoring engine, so inputs are
built exactly as at scoring time), the adapter, the datasets, the Trainer, then the adapter folder:
`adapter_config.json` + `adapter_model.safetensors` (standard peft), `training_config.json`,
`loss_log.jsonl` and a model card `README.md`. Intermediate checkpoints (one per epoch, with
optimizer state) go to `OUT/trainer/`; `resume=True` continues from the last one. Runs on one GPU,
on several through `accelerate launch` / `torchrun` (data parallel), and on the CPU for tests.

    python -m training.train_lora DIR --model Qwen/Qwen3-VL-4B-Instruct --out checkpoints/judge
    accelerate launch --num_processes 4 -m training.train_lora DIR --model M --out checkpoints/judge
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Optional

from .examples import TARGETS, TASKS

LANGUAGE_LINEAR = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
VISION_LINEAR = r".*visual.*\.(qkv|proj|linear_fc1|linear_fc2)"


# ----------------------------------------------------------------------------- 1. config
@dataclass
class TrainConfig:
    """One training run; saved as training_config.json next to the adapter."""

    data: str = field(metadata={"help": "distillation folder (from `adaptrubric distill collect`)"})
    model: str = field(metadata={"help": "student base model: hub id or local folder"})
    out: str = field(metadata={"help": "adapter folder to write, e.g. checkpoints/NAME"})
    target: str = field(default="full", metadata={"help": "full: teacher's reasoning + verdict lines; verdict: the "
                                                          "three lines only (fewer generated tokens)"})
    tasks: tuple[str, ...] = field(default=("verify",), metadata={"help": "calls to learn: verify,route,cue"})
    epochs: float = field(default=3.0, metadata={"help": "passes over train"})
    learning_rate: float = field(default=2e-4, metadata={"help": "peak learning rate (AdamW, linear decay)"})
    warmup_ratio: float = field(default=0.03, metadata={"help": "fraction of steps for warmup"})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank"})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha"})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout"})
    batch_size: int = field(default=1, metadata={"help": "examples per device per step"})
    grad_accum: int = field(default=8, metadata={"help": "gradient accumulation steps"})
    max_visual_tokens: Optional[int] = field(default=6144, metadata={
        "help": "visual-token budget per trajectory; score with the same value"})
    load_in_4bit: bool = field(default=False, metadata={"help": "QLoRA: the base model in 4-bit (bitsandbytes nf4)"})
    train_vision: bool = field(default=False, metadata={"help": "also put LoRA on the vision tower (frozen by default)"})
    train_lm_head: bool = field(default=False, metadata={"help": "also train lm_head fully (large on real models)"})
    gradient_checkpointing: bool = field(default=True, metadata={"help": "trade compute for activation memory"})
    dtype: str = field(default="auto", metadata={"help": "auto (bf16 on GPU, fp32 on CPU) | bf16 | fp16 | fp32"})
    seed: int = field(default=0, metadata={"help": "random seed"})
    logging_steps: int = field(default=10, metadata={"help": "log the loss every N optimizer steps"})
    save_total_limit: int = field(default=2, metadata={"help": "epoch checkpoints kept in OUT/trainer"})
    resume: bool = field(default=False, metadata={"help": "continue from the last checkpoint in OUT/trainer"})
    progress: bool = field(default=True, metadata={"help": "show progress bars"})

    def __post_init__(self):
        self.tasks = tuple(self.tasks.split(",")) if isinstance(self.tasks, str) else tuple(self.tasks)
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        bad = [t for t in self.tasks if t not in TASKS]
        if bad or not self.tasks:
            raise ValueError(f"tasks must be a non-empty subset of {','.join(TASKS)}, got {','.join(self.tasks)}")
        for name in ("lora_r", "lora_alpha", "batch_size", "grad_accum", "logging_steps", "save_total_limit"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.epochs <= 0 or self.learning_rate <= 0:
            raise ValueError("epochs and learning_rate must be > 0")
        if self.max_visual_tokens is not None and self.max_visual_tokens < 4:
            raise ValueError("max_visual_tokens must be >= 4 (or None for no budget)")
        if self.dtype not in ("auto", "bf16", "fp16", "fp32"):
            raise ValueError(f"dtype must be auto, bf16, fp16 or fp32, got {self.dtype!r}")
        if not (Path(self.data) / "train.jsonl").is_file():
            raise ValueError(f"{self.data}: no train.jsonl (run `adaptrubric distill collect` first)")

    def to_json(self, path: str | Path) -> None:
        """Write the config as JSON."""
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n")


def load_config_file(path: str | Path) -> dict:
    """A YAML/JSON config file as TrainConfig fields; unknown keys are an error naming the file."""
    import yaml

    raw = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a config file must be a mapping of TrainConfig fields")
    raw = {k.replace("-", "_"): v for k, v in raw.items()}
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {unknown}; known: {', '.join(sorted(known))}")
    return raw


def add_train_args(p: argparse.ArgumentParser) -> None:
    """One flag per TrainConfig field (default None: the config file's value, else the field's)."""
    p.add_argument("data", help="distillation folder (from `adaptrubric distill collect`)")
    p.add_argument("--config", help="YAML file of TrainConfig fields; flags given override it")
    for f in fields(TrainConfig):
        if f.name == "data":
            continue
        flag = "--" + f.name.replace("_", "-")
        helptext = f.metadata.get("help", "")
        if f.type in ("bool", bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                           help=f"{helptext} (default {'on' if f.default else 'off'})")
        else:
            conv = {"float": float, "int": int, "Optional[int]": int}.get(str(f.type), str)
            default = f.default if f.default is not MISSING else None
            p.add_argument(flag, type=conv, default=None, choices=TARGETS if f.name == "target" else None,
                           help=f"{helptext} (default {','.join(default) if isinstance(default, tuple) else default})")


def config_from_args(args) -> TrainConfig:
    """TrainConfig from --config (if given) overridden by the flags actually given."""
    values = load_config_file(args.config) if getattr(args, "config", None) else {}
    for f in fields(TrainConfig):
        v = getattr(args, f.name, None)
        if v is not None:
            values[f.name] = v
    missing = [n for n in ("model", "out") if n not in values]
    if missing:
        raise ValueError(f"give {' and '.join('--' + m for m in missing)} (or set them in --config)")
    return TrainConfig(**values)


# ----------------------------------------------------------------------------- 2. student and adapter
def load_student(cfg: TrainConfig):
    """The scoring engine on the base model (its encoder builds the inputs) with a fresh LoRA on it."""
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    local_rank = int(os.environ.get("LOCAL_RANK", "-1"))
    device_map = {"": local_rank} if torch.cuda.is_available() and local_rank >= 0 else (
        "auto" if torch.cuda.is_available() else None)
    engine = HFEngine(HFEngineConfig(model=cfg.model, dtype=cfg.dtype, device_map=device_map,
                                     load_in_4bit=cfg.load_in_4bit, max_visual_tokens=cfg.max_visual_tokens,
                                     attn_implementation="sdpa", image_workers=2))
    model = engine.model
    model.config.use_cache = False
    if cfg.load_in_4bit:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=cfg.gradient_checkpointing)
    targets = LANGUAGE_LINEAR if not cfg.train_vision else f"({LANGUAGE_LINEAR})|({VISION_LINEAR})"
    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout, target_modules=targets,
                      modules_to_save=["lm_head"] if cfg.train_lm_head else None, bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    return engine, model


# ----------------------------------------------------------------------------- 3. data
class ExampleDataset:
    """A list of Examples as a map-style dataset."""

    def __init__(self, items):
        self.items = list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def datasets(cfg: TrainConfig):
    """(train, val or None) example datasets."""
    from .examples import examples, read_split

    train = examples(read_split(cfg.data, "train"), cfg.data, cfg.target, cfg.tasks)
    if not train:
        raise ValueError(f"{cfg.data}/train.jsonl gives no examples for tasks {','.join(cfg.tasks)}")
    val_path = Path(cfg.data) / "val.jsonl"
    val = examples(read_split(cfg.data, "val"), cfg.data, cfg.target, cfg.tasks) if val_path.is_file() else []
    return ExampleDataset(train), (ExampleDataset(val) if val else None)


# ----------------------------------------------------------------------------- 4. trainer
def _callbacks(out: Path):
    from transformers import TrainerCallback

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

    return [Participation()]


def train(cfg: TrainConfig) -> dict:
    """Train, save the adapter folder, return the run's numbers."""
    import torch
    from transformers import Trainer, TrainingArguments

    from .examples import Collator

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    train_ds, val_ds = datasets(cfg)
    engine, model = load_student(cfg)
    cuda = torch.cuda.is_available()
    bf16 = cuda and cfg.dtype in ("auto", "bf16") and torch.cuda.is_bf16_supported()
    args = TrainingArguments(
        output_dir=str(out / "trainer"), num_train_epochs=cfg.epochs, learning_rate=cfg.learning_rate,
        warmup_steps=cfg.warmup_ratio, per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=cfg.batch_size, gradient_accumulation_steps=cfg.grad_accum,
        eval_strategy="epoch" if val_ds else "no", save_strategy="epoch", save_total_limit=cfg.save_total_limit,
        logging_steps=cfg.logging_steps, logging_first_step=True, report_to=[], remove_unused_columns=False,
        gradient_checkpointing=cfg.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False} if cfg.gradient_checkpointing else None,
        use_cpu=not cuda, bf16=bf16, seed=cfg.seed, dataloader_num_workers=0, disable_tqdm=not cfg.progress,
        ddp_find_unused_parameters=False, label_names=["labels"])
    trainer = Trainer(model=model, args=args, data_collator=Collator(engine), train_dataset=train_ds,
                      eval_dataset=val_ds, callbacks=_callbacks(out))
    t0 = time.perf_counter()
    resume = cfg.resume and any((out / "trainer").glob("checkpoint-*"))
    result = trainer.train(resume_from_checkpoint=True if resume else None)
    seconds = time.perf_counter() - t0
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    summary = {"train_examples": len(train_ds), "val_examples": len(val_ds) if val_ds else 0,
               "train_loss": result.training_loss, "eval_loss": evals[-1]["eval_loss"] if evals else None,
               "epochs": cfg.epochs, "optimizer_steps": trainer.state.global_step, "seconds": seconds,
               "samples_per_s": len(train_ds) * cfg.epochs / seconds if seconds else None,
               "world_size": args.world_size, "resumed": bool(resume)}
    # ------------------------------------------------------------------------- 5. the adapter folder
    if trainer.is_world_process_zero():
        trainer.model.save_pretrained(str(out))
        cfg.to_json(out / "training_config.json")
        with open(out / "loss_log.jsonl", "w") as fh:
            for h in trainer.state.log_history:
                fh.write(json.dumps(h) + "\n")
        (out / "train_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        write_model_card(out, cfg, summary)
    engine.close()
    return summary


def write_model_card(out: Path, cfg: TrainConfig, summary: dict, evaluation: Optional[dict] = None) -> None:
    """README.md: base model, teacher, data counts, metrics, bank hash, target, how to use it."""
    manifest_path = Path(cfg.data) / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    teacher = manifest.get("teacher", {})
    counts = manifest.get("counts", {})
    pipe = manifest.get("pipeline", {})
    lines = [
        "---", "library_name: peft", f"base_model: {cfg.model}", "tags: [adaptrubric, lora, gui-agent-verifier]", "---",
        "", f"# AdaptRubric verifier adapter: {Path(cfg.out).name}", "",
        f"A LoRA adapter{' (QLoRA, 4-bit base)' if cfg.load_in_4bit else ''} for `{cfg.model}` distilled from "
        f"the teacher `{teacher.get('name', '?')}` ({teacher.get('kind', '?')}) on AdaptRubric judgments.", "",
        "| | |", "|---|---|",
        f"| base model | `{cfg.model}` |",
        f"| teacher | `{teacher.get('name', '?')}` ({teacher.get('kind', '?')}) |",
        f"| target | `{cfg.target}` ({'reasoning + verdict lines' if cfg.target == 'full' else 'verdict lines only'}) |",
        f"| tasks | {', '.join(cfg.tasks)} |",
        f"| bank sha | `{manifest.get('bank_sha', '?')}` |",
        f"| prompts sha | `{manifest.get('prompts_sha', '?')}` |",
        f"| data | train {summary.get('train_examples')} examples ({counts.get('train', '?')} trajectories, "
        f"{counts.get('train_positive', '?')} positive), val {summary.get('val_examples')} examples "
        f"({counts.get('val', '?')} trajectories); teacher outputs left out: {counts.get('unparsed', 0)} unparsed, "
        f"{counts.get('disagree', 0)} disagreeing with labels |",
        f"| pipeline at collection | router `{pipe.get('router')}`, fine cues {pipe.get('fine')}, "
        f"max_images {pipe.get('max_images')} |",
        f"| max visual tokens | {cfg.max_visual_tokens} |",
        f"| LoRA | r {cfg.lora_r}, alpha {cfg.lora_alpha}, dropout {cfg.lora_dropout}; vision tower "
        f"{'LoRA' if cfg.train_vision else 'frozen'} |",
        f"| training | {cfg.epochs} epochs, lr {cfg.learning_rate}, batch {cfg.batch_size} x accum {cfg.grad_accum} "
        f"x {summary.get('world_size', 1)} process(es), {summary.get('optimizer_steps')} steps, "
        f"{summary.get('seconds', 0):.0f} s |",
        f"| train loss / val loss | {_f(summary.get('train_loss'))} / {_f(summary.get('eval_loss'))} |",
        "",
    ]
    if evaluation:
        lines += ["## Evaluation on held-out tasks", "", "| | base | adapter |", "|---|---|---|"]
        for k, row in evaluation.items():
            lines.append(f"| {k} | {_f(row.get('base'))} | {_f(row.get('adapter'))} |")
        lines.append("")
    lines += ["## Use", "", "```",
              f"adaptrubric score DATA --model {cfg.model} --adapter {cfg.out} --max-visual-tokens "
              f"{cfg.max_visual_tokens} --out verdicts.jsonl"
              + (" --router rules" if pipe.get("router") == "rules" else "")
              + (" --no-fine" if pipe.get("fine") is False else ""),
              "```", "", "Score with the pipeline settings the teacher ran with (above) so the student sees the "
              "prompt layout it was trained on. Files: `training_config.json` (this run), `loss_log.jsonl`.", ""]
    (out / "README.md").write_text("\n".join(lines))


def _f(x) -> str:
    return f"{x:.4g}" if isinstance(x, (int, float)) else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.train_lora", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_train_args(ap)
    args = ap.parse_args(argv)
    try:
        summary = train(config_from_args(args))
    except ValueError as exc:
        print(f"train_lora: error: {exc}", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") == "0":
        print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
