"""How to load and run a Qwen3-VL checkpoint: the transformers engine's settings.

A plain dataclass with help text and validation, kept apart from `hf.py` so that command-line
parsing can read the options without importing torch or transformers. Knows nothing about models
beyond their names and paths.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_MODEL = "Qwen/Qwen3-VL-4B-Instruct"
CPU_BATCH_TOKENS = 262_144  # padded tokens per group on the CPU, where memory is rarely the limit


def at_least(config, low: float, *names: str) -> None:
    """ValueError naming the first of the fields `names` of dataclass `config` under `low` ("or None"
    for a field whose default is None, which passes)."""
    for name in names:
        value, optional = getattr(config, name), config.__dataclass_fields__[name].default is None
        if value is not None and value < low:
            raise ValueError(f"{name} must be >= {low}{' or None' if optional else ''}, got {value}")


@dataclass
class HFEngineConfig:
    """How to load and run a Qwen3-VL checkpoint."""

    model: str = field(default=DEFAULT_MODEL, metadata={"common": "model and engine",
        "help": "Qwen3-VL checkpoint: a hub id (e.g. Qwen/Qwen3-VL-8B-Instruct) or a local folder saved with "
                "save_pretrained (safetensors)"})
    dtype: str = field(default="auto", metadata={"help": "auto: bf16 on GPU, fp32 on CPU",
                                                 "choices": ["auto", "bf16", "fp16", "fp32"]})
    device_map: str | None = field(default="auto", metadata={"help": "transformers device_map; ignored on CPU"})
    attn_implementation: str | None = field(default=None, metadata={
        "help": "transformers attention kernel", "none": "flash_attention_2 on GPU when transformers can run it (the "
                "flash-attn distribution, >= 2.3.3), else sdpa with a line saying why; on CPU sdpa_padded_prefill"})
    load_in_4bit: bool = field(default=False, metadata={"help": "bitsandbytes nf4 quantisation"})
    load_in_8bit: bool = field(default=False, metadata={"help": "bitsandbytes int8 quantisation"})
    adapter: str | None = field(default=None, metadata={"common": "model and engine",
        "help": "LoRA adapter folder (peft)"})
    max_new_tokens: int = field(default=1024, metadata={
        "help": "cap on generated tokens per request (rows that set stop_after_line end earlier); commands set it "
                "from the pipeline's caps", "no_flag": True})
    votes: int = field(default=1, metadata={"help": "samples per request; >1 samples (temperature) for majority vote"})
    temperature: float = field(default=0.7, metadata={"help": "sampling temperature when votes > 1"})
    max_batch_size: int = field(default=16, metadata={"common": "model and engine",
        "help": "most requests in one generate call"})
    max_batch_tokens: int | None = field(default=None, metadata={
        "help": "padded tokens (prompt + new, times samples) per generate call, lowered after an out-of-memory "
                "error",
        "none": "on CUDA derived from free GPU memory, with each group also checked against the memory model of "
                f"the attention implementation (engine/memory.py; off when this is given), {CPU_BATCH_TOKENS} on "
                "the CPU"})
    max_pixels: int | None = field(default=None, metadata={"help": "per-image pixel cap",
                                                              "none": "the processor's"})
    max_visual_tokens: int | None = field(default=None, metadata={
        "help": "visual-token budget per request (trajectory), e.g. 6144 for speed",
        "none": "the processor's own resolution, as in the paper"})
    image_workers: int = field(default_factory=lambda: max(1, os.cpu_count() or 1),
                               metadata={"help": "threads for image decode/resize"})
    compile: bool = field(default=False, metadata={
        "help": "static KV cache, with torch.compile of the decode step on CUDA (recompiles per batch shape)"})
    sampling_seed: int = field(default=0, metadata={"help": "random seed for sampling (votes > 1)"})

    def __post_init__(self):
        if self.dtype not in ("auto", "bf16", "fp16", "fp32"):
            raise ValueError(f"dtype must be auto, bf16, fp16 or fp32, got {self.dtype!r}")
        if self.load_in_4bit and self.load_in_8bit:
            raise ValueError("choose one of load_in_4bit and load_in_8bit")
        at_least(self, 1, "max_new_tokens", "votes", "max_batch_size", "image_workers", "max_batch_tokens")
        at_least(self, 4, "max_visual_tokens")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.adapter and not Path(self.adapter).is_dir():
            raise ValueError(f"adapter folder not found: {self.adapter}")

    @property
    def name(self) -> str:
        """The engine's name, as verdicts and settings records give it: the model, `+adapter` with one."""
        return self.model + (f"+{self.adapter}" if self.adapter else "")
