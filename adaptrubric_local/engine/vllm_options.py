"""vLLM's own options (`VLLMOptions`: the settings of `--engine vllm` that no other engine reads, each a
flag of its own) and their names (`VLLM_FIELDS`, which options.py's ENGINE_OPTIONS lists).
Imports neither torch nor vLLM; knows nothing about the options both engines share (hf_config.py),
the `vllm.LLM` arguments (vllm_config.py) or which engine reads what (options.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from .hf_config import at_least


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
        at_least(self, 1, "max_model_len", "limit_mm_per_prompt", "max_num_seqs", "tensor_parallel_size")
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


VLLM_FIELDS = frozenset(VLLMOptions.__dataclass_fields__)
