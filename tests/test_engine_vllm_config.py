"""The vLLM engine's settings (engine/vllm_config.py), everywhere (vLLM need not be installed): options
validated, the transformers engine's options refused where they mean nothing to vLLM, what vLLM's LoRA
cannot load, and the `vllm.LLM` arguments a config becomes."""
import json

import pytest

from adaptrubric_local.engine.vllm_config import (
    VLLMEngineConfig,
    llm_kwargs,
    lora_rank_slot,
    lora_unsupported,
)


def test_shared_options_are_refused_when_meaningless_and_lora_limits_named(tmp_path):
    with pytest.raises(ValueError, match="load_in_4bit.*quantis"):
        VLLMEngineConfig(model="m", load_in_4bit=True)
    (tmp_path / "a").mkdir()
    conf = tmp_path / "a" / "adapter_config.json"
    conf.write_text(json.dumps({"peft_type": "LORA", "modules_to_save": ["lm_head"]}))
    assert "lm_head" in lora_unsupported(tmp_path / "a")
    conf.write_text(json.dumps({"peft_type": "LORA", "target_modules": ["q_proj"]}))
    assert lora_unsupported(tmp_path / "a") is None


def test_a_config_becomes_the_llm_arguments_of_its_options():
    cfg = VLLMEngineConfig(model="m", max_model_len=2048, max_num_seqs=4, enforce_eager=True, limit_mm_per_prompt=3,
                           vllm_engine_args='{"max_num_batched_tokens": 4096}')
    cpu = llm_kwargs(cfg, "weights", cuda=False)
    assert (cpu["model"], cpu["tokenizer"], cpu["dtype"]) == ("weights", "weights", "float32")
    assert cpu["kv_cache_memory_bytes"] == 2 ** 30  # 1 GiB on the CPU unless --kv-cache-memory-gb
    assert cpu["limit_mm_per_prompt"] == {"image": 3, "video": 0} and cpu["max_model_len"] == 2048
    assert (cpu["max_num_seqs"], cpu["enforce_eager"], cpu["max_num_batched_tokens"]) == (4, True, 4096)
    assert "enable_lora" not in cpu
    gpu = llm_kwargs(VLLMEngineConfig(model="m", dtype="fp16"), "m", cuda=True, lora_rank=12)
    assert gpu["dtype"] == "float16" and "kv_cache_memory_bytes" not in gpu and "max_model_len" not in gpu
    assert (gpu["enable_lora"], gpu["max_lora_rank"], gpu["max_loras"]) == (True, 16, 1)
    assert llm_kwargs(VLLMEngineConfig(model="m"), "m", cuda=True)["dtype"] == "bfloat16"
    assert [lora_rank_slot(r) for r in (1, 8, 9, 300, 512)] == [8, 8, 16, 320, 512]
    with pytest.raises(ValueError, match="512"):
        lora_rank_slot(513)
