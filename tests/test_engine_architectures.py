"""The published Qwen3-VL architectures (engine/architectures.py), counted on the meta device: the sizes
the memory planner and the GPU benchmarks use when the weights are not on the machine."""
import pytest

from adaptrubric_local.distill.plan import arch_of
from adaptrubric_local.engine.architectures import ARCHITECTURES, QWEN_TOKEN_IDS, qwen3vl_config


def test_parameter_counts_match_the_published_models():
    a4 = arch_of(qwen3vl_config(ARCHITECTURES["Qwen/Qwen3-VL-4B-Instruct"]))
    a8 = arch_of(qwen3vl_config(ARCHITECTURES["Qwen/Qwen3-VL-8B-Instruct"]))
    assert sum(a4.params.values()) / 1e9 == pytest.approx(4.44, abs=0.01)  # "4B": 4.4B with the vision tower
    assert sum(a8.params.values()) / 1e9 == pytest.approx(8.77, abs=0.01)
    assert a4.params["lm_head"] == 0 and a8.params["lm_head"] == 151936 * 4096  # 4B ties its head
    a2 = arch_of(qwen3vl_config(ARCHITECTURES["Qwen/Qwen3-VL-2B-Instruct"]))
    a32 = arch_of(qwen3vl_config(ARCHITECTURES["Qwen/Qwen3-VL-32B-Instruct"]))
    assert sum(a2.params.values()) / 1e9 == pytest.approx(2.13, abs=0.01)  # "2B": 2.1B
    assert sum(a32.params.values()) / 1e9 == pytest.approx(33.36, abs=0.01)  # "32B": 33.4B
    assert a2.params["lm_head"] == 0 and a32.params["lm_head"] == 151936 * 5120  # 2B ties its head, 32B not
    # LoRA on the 7 linear kinds of 36 layers: r x (in + out) each
    assert a4.lora_params == 36 * (2560 + 4096 + 2 * (2560 + 1024) + 4096 + 2560 + 3 * (2560 + 9728))


def test_token_ids_can_be_replaced():
    cfg = qwen3vl_config(ARCHITECTURES["Qwen/Qwen3-VL-8B-Instruct"], token_ids={"<|image_pad|>": 7})
    assert cfg.image_token_id == 7 and cfg.video_token_id == QWEN_TOKEN_IDS["<|video_pad|>"]
    assert cfg.text_config.vocab_size == 151936 and not cfg.tie_word_embeddings
