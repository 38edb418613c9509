"""engine/published.py: the published Qwen3-VL checkpoints' config and processor, made offline."""
import pytest

from adaptrubric_local.engine.published import published


def test_the_published_processor_is_qwen3vls():
    """The settings of the checkpoints' preprocessor_config.json (as published: patch 16,
    temporal patch 2, merge 2, mean/std 0.5, 65,536 to 16,777,216 pixels) on the 151,669-token tokenizer."""
    processor, config, _ = published("Qwen/Qwen3-VL-8B-Thinking")
    ip = processor.image_processor
    assert (ip.patch_size, ip.temporal_patch_size, ip.merge_size) == (16, 2, 2)
    assert list(ip.image_mean) == list(ip.image_std) == [0.5, 0.5, 0.5]
    assert dict(ip.size) == {"shortest_edge": 65_536, "longest_edge": 16_777_216}
    assert len(processor.tokenizer) == 151_669 and config.text_config.vocab_size == 151_936
    assert processor.tokenizer.convert_tokens_to_ids("<|image_pad|>") == config.image_token_id == 151_655
    rendered = processor.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True,
                                             tokenize=False)
    assert rendered.endswith("<|im_start|>assistant\n<think>\n")  # a Thinking checkpoint's reply opens thinking


def test_an_unknown_checkpoint_is_not_published():
    with pytest.raises(KeyError):
        published("someone/another-model")


def test_the_local_cache_is_read_offline_and_a_miss_is_the_published_copy(monkeypatch):
    from transformers import AutoConfig, AutoProcessor

    from adaptrubric_local.engine.published import PUBLISHED, config_and_processor

    seen = []

    def load(model, local_files_only):
        from huggingface_hub import constants

        seen.append((model, local_files_only, constants.HF_HUB_OFFLINE))
        return model

    for auto in (AutoProcessor, AutoConfig):
        monkeypatch.setattr(auto, "from_pretrained", staticmethod(load))
    processor, config, where = config_and_processor("Qwen/Qwen3-VL-4B-Instruct")
    assert (processor, config) == ("Qwen/Qwen3-VL-4B-Instruct",) * 2 and "local Hugging Face cache" in where
    assert {s[1] for s in seen} == {True} and {s[2] for s in seen} == {True}

    def missing(model, local_files_only):
        raise OSError("not in the cache")

    for auto in (AutoProcessor, AutoConfig):
        monkeypatch.setattr(auto, "from_pretrained", staticmethod(missing))
    assert config_and_processor("Qwen/Qwen3-VL-4B-Instruct")[2] == PUBLISHED.format(model="Qwen/Qwen3-VL-4B-Instruct")
