"""The tiny random Qwen3-VL (engine/tiny.py) that tests, the demo and benchmarks load through the real
`from_pretrained` path: its tokenizer, chat template and saved folder."""
import json

from adaptrubric_local.engine.tiny import QWEN_SPECIALS, build_tokenizer


def test_tokenizer_is_trained_on_the_given_text_with_qwens_special_tokens():
    tok = build_tokenizer(["SCORE: 1\nEVIDENCE_SUFFICIENT: yes\n"] * 20, vocab_size=300)
    assert all(tok.convert_tokens_to_ids(t) is not None for t in QWEN_SPECIALS)
    assert (tok.eos_token, tok.pad_token, tok.padding_side) == ("<|im_end|>", "<|endoftext|>", "left")
    assert len(tok("EVIDENCE_SUFFICIENT").input_ids) <= 3  # merged from the corpus
    again = build_tokenizer(["SCORE: 1\nEVIDENCE_SUFFICIENT: yes\n"] * 20, vocab_size=300)
    assert again.get_vocab() == tok.get_vocab()  # same text, same tokenizer


def test_chat_template_puts_one_vision_block_per_image():
    tok = build_tokenizer(["a b c"] * 5, vocab_size=270)
    text = tok.apply_chat_template([{"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image"}, {"type": "image"}]}], tokenize=False,
        add_generation_prompt=True)
    assert text == ("<|im_start|>user\nlook<|vision_start|><|image_pad|><|vision_end|>"
                    "<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n<|im_start|>assistant\n")


def test_the_saved_folder_is_a_safetensors_checkpoint_with_qwen_token_ids(tiny_model):
    files = {p.name for p in tiny_model.iterdir()}
    assert {"config.json", "model.safetensors", "README.md"} <= files and not any(f.endswith(".bin") for f in files)
    cfg = json.loads((tiny_model / "config.json").read_text())
    vocab = json.loads((tiny_model / "tokenizer.json").read_text())["added_tokens"]
    ids = {t["content"]: t["id"] for t in vocab}
    assert cfg["model_type"] == "qwen3_vl" and cfg["image_token_id"] == ids["<|image_pad|>"]
    assert cfg["vision_start_token_id"] == ids["<|vision_start|>"]


def test_the_text_head_size_is_one_vllm_kernels_accept(tiny_model):
    """vLLM's CPU attention takes head sizes 32, 64, 80, ... (16 kills its engine at the first request); M-RoPE's
    sections must add up to half of it. The tiny model loads and runs in vLLM too (test_engine_vllm_engine.py)."""
    import pytest

    from adaptrubric_local.engine.tiny import build_config

    text = json.loads((tiny_model / "config.json").read_text())["text_config"]
    assert text["head_dim"] == 32 and text["rope_parameters"]["mrope_section"] == [8, 4, 4]
    assert sum(text["rope_parameters"]["mrope_section"]) == text["head_dim"] // 2
    tok = build_tokenizer(["a b c"] * 5, vocab_size=270)
    assert build_config(tok, head_dim=64).text_config.rope_parameters["mrope_section"] == [16, 8, 8]
    with pytest.raises(ValueError, match="multiple of 8"):
        build_config(tok, head_dim=20)
