"""engine/vllm_options.py: vLLM's own options, validated, and their names (what the option table lists)."""
import dataclasses

import pytest

from adaptrubric_local.engine.options import ENGINE_OPTIONS, readers
from adaptrubric_local.engine.vllm_options import VLLM_FIELDS, VLLMOptions


def test_vllm_options_are_validated():
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        VLLMOptions(gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="not valid JSON"):
        VLLMOptions(vllm_engine_args="{oops")
    with pytest.raises(ValueError, match="JSON object"):
        VLLMOptions(vllm_engine_args="[1]")
    assert VLLMOptions(vllm_engine_args='{"max_num_batched_tokens": 4096}').extra_args() == {
        "max_num_batched_tokens": 4096}
    assert VLLMOptions().image_limit == 10 and VLLMOptions(limit_mm_per_prompt=3).image_limit == 3


def test_every_field_is_an_engine_option_read_by_vllm_alone_and_has_help():
    names = {f.name for f in dataclasses.fields(VLLMOptions)}
    assert names == VLLM_FIELDS and names <= ENGINE_OPTIONS
    assert all(readers(n) == ("vllm",) for n in names)
    assert all(f.metadata.get("help") for f in dataclasses.fields(VLLMOptions))
