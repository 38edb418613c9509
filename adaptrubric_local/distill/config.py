"""The settings of one `distill train` run: a dataclass with help text, validated on creation, saved
as `training_config.json` next to the adapter (as peft saves its LoraConfig). Its flags and its
config-file keys are the field names (`flags.py`). Knows nothing about models or the trainer.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

TASKS = ("verify", "route", "cue")
TARGETS = ("full", "verdict")
CLASS_WEIGHTS = ("none", "balanced")
DTYPES = ("auto", "bf16", "fp16", "fp32")


@dataclass
class TrainConfig:
    """One training run; saved as training_config.json next to the adapter."""

    data: str = field(metadata={"help": "distillation folder (from `adaptrubric distill collect`)", "no_flag": True})
    model: str = field(metadata={"help": "student base model: hub id or local folder"})
    out: str = field(metadata={"help": "adapter folder to write, e.g. checkpoints/NAME"})
    target: str = field(default="full", metadata={
        "help": "full: the teacher's visible reasoning + verdict lines (never its hidden thinking); verdict: the "
                "three lines only (fewer generated tokens)"})
    tasks: tuple[str, ...] = field(default=("verify",), metadata={"help": "calls to learn: verify,route,cue"})
    epochs: float = field(default=3.0, metadata={"help": "passes over train"})
    learning_rate: float = field(default=2e-4, metadata={"help": "peak learning rate (AdamW, linear decay)"})
    warmup_ratio: float = field(default=0.03, metadata={"help": "fraction of steps for warmup"})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank"})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha"})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout"})
    per_device_batch_size: int = field(default=1, metadata={"help": "training examples per device per step"})
    grad_accum: int = field(default=8, metadata={"help": "gradient accumulation steps"})
    max_visual_tokens: int | None = field(default=None, metadata={
        "help": "visual-token budget per trajectory; recorded in the adapter, which `score --adapter` then adopts",
        "none": "the processor's own resolution, as in the paper"})
    max_pixels: int | None = field(default=None, metadata={
        "help": "per-image pixel cap; recorded in the adapter like the budget", "none": "the processor's"})
    max_seq_len: int = field(default=32768, metadata={
        "help": "longest example (text + visual + target tokens) allowed; longer ones stop the run before "
                "it starts, with the change that would fit"})
    load_in_4bit: bool = field(default=False, metadata={"help": "QLoRA: the base model in 4-bit (bitsandbytes nf4)"})
    train_vision: bool = field(default=False, metadata={
        "help": "also put LoRA on the vision tower (otherwise it stays frozen)"})
    train_lm_head: bool = field(default=False, metadata={"help": "also train lm_head fully (large on real models)"})
    gradient_checkpointing: bool = field(default=True, metadata={"help": "trade compute for activation memory"})
    dtype: str = field(default="auto", metadata={"help": "auto (bf16 on GPU, fp32 on CPU) | bf16 | fp16 | fp32"})
    soft_labels: bool = field(default=True, metadata={
        "help": "learn the teacher's P(SCORE=1) where the collection recorded it (a KL term at the SCORE digit "
                "next to cross-entropy); off: the teacher's SCORE digit only"})
    kd_weight: float = field(default=1.0, metadata={"help": "weight of the KL term to the teacher's P(SCORE=1)"})
    score_token_weight: float = field(default=4.0, metadata={
        "help": "weight of the SCORE digit, the token that decides the reward, among the response tokens (raise it "
                "further with --target full, where it is 1 of hundreds)"})
    class_weight: str = field(default="none", metadata={
        "help": "none | balanced: weight examples inversely to the frequency of the teacher's SCORE"})
    early_stopping_patience: int | None = field(default=None, metadata={
        "help": "stop after this many epochs without a better validation agreement", "none": "run every epoch"})
    dataloader_workers: int | None = field(default=None, metadata={
        "help": "processes that decode screenshots while the GPU trains",
        "none": "2 on a GPU, 0 on the CPU, where starting them costs more than they save"})
    group_by_length: bool = field(default=True, metadata={"help": "batch examples of similar length together"})
    gpu_memory: str | None = field(default=None, metadata={
        "help": "plan for this much GPU memory (e.g. 24GB) instead of the GPU present"})
    force: bool = field(default=False, metadata={"help": "train even when the memory plan says it will not fit"})
    seed: int = field(default=0, metadata={"help": "random seed"})
    logging_steps: int = field(default=10, metadata={"help": "log the loss every N optimizer steps"})
    save_total_limit: int = field(default=2, metadata={"help": "epoch checkpoints kept in OUT/trainer (and the best)"})
    resume: bool = field(default=False, metadata={"help": "continue from the last checkpoint in OUT/trainer"})
    progress: bool = field(default=True, metadata={"help": "show progress bars"})

    def __post_init__(self):
        self.tasks = tuple(x for x in self.tasks.split(",") if x) if isinstance(self.tasks, str) else tuple(self.tasks)
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        bad = [t for t in self.tasks if t not in TASKS]
        if bad or not self.tasks:
            raise ValueError(f"tasks must be a non-empty subset of {','.join(TASKS)}, got {','.join(self.tasks)}")
        for name in ("lora_r", "lora_alpha", "per_device_batch_size", "grad_accum", "logging_steps",
                     "save_total_limit", "max_seq_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.epochs <= 0 or self.learning_rate <= 0:
            raise ValueError("epochs and learning_rate must be > 0")
        if self.max_visual_tokens is not None and self.max_visual_tokens < 4:
            raise ValueError("max_visual_tokens must be >= 4 (or none for no budget)")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be auto, bf16, fp16 or fp32, got {self.dtype!r}")
        if self.class_weight not in CLASS_WEIGHTS:
            raise ValueError(f"class_weight must be one of {', '.join(CLASS_WEIGHTS)}, got {self.class_weight!r}")
        if self.kd_weight < 0 or self.score_token_weight < 0:
            raise ValueError("kd_weight and score_token_weight must be >= 0")
        if self.early_stopping_patience is not None and self.early_stopping_patience < 1:
            raise ValueError("early_stopping_patience must be >= 1 (or none)")
        if self.dataloader_workers is not None and self.dataloader_workers < 0:
            raise ValueError(f"dataloader_workers must be >= 0, got {self.dataloader_workers}")
        if not (Path(self.data) / "train.jsonl").is_file():
            raise ValueError(f"{self.data}: no train.jsonl (run `adaptrubric distill collect` first)")


def load_config_file(path: str | Path) -> dict:
    """A YAML/JSON config file as TrainConfig fields; unknown keys are an error naming the file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        hint = ("; the ready configs (training/*.yaml) are files of the source checkout, not installed with the "
                "package: run from a clone of the repository, copy the file, or give its options as flags "
                "(`adaptrubric distill train --help`)") if "training" in path.parts else ""
        raise FileNotFoundError(f"--config {path}: no such file (looked in {Path.cwd()}){hint}")
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a config file must be a mapping of TrainConfig fields")
    raw = {k.replace("-", "_"): v for k, v in raw.items()}
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {unknown}; known: {', '.join(sorted(known))}")
    return raw


def config_from_args(args, **defaults) -> TrainConfig:
    """TrainConfig from `defaults`, then --config (if given), then the flags actually given."""
    from ..flags import config_kwargs

    values = dict(defaults)
    values.update(load_config_file(args.config) if getattr(args, "config", None) else {})
    values.update(config_kwargs(args, TrainConfig, skip=("data",), only_given=True))
    values["data"] = args.data
    missing = [n for n in ("model", "out") if n not in values]
    if missing:
        raise ValueError(f"give {' and '.join('--' + m.replace('_', '-') for m in missing)} (or set them in --config)")
    return TrainConfig(**values)
