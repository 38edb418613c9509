"""The published Qwen3-VL architectures, 2B, 4B, 8B and 32B (sizes from the checkpoints' config.json; a
Thinking checkpoint has its Instruct sibling's), so that memory plans and GPU benchmarks can be made for a
model whose weights are not on this machine: a plan counts its parameters on the meta device, a
benchmark builds it with random weights. Knows nothing about checkpoints' weights, tokenizers or rubrics.
"""
from __future__ import annotations

# Qwen's special token ids (tokenizer_config.json of every Qwen3-VL checkpoint)
QWEN_TOKEN_IDS = {"<|endoftext|>": 151643, "<|im_end|>": 151645, "<|vision_start|>": 151652,
                  "<|vision_end|>": 151653, "<|image_pad|>": 151655, "<|video_pad|>": 151656}
VOCAB = 151936

# vision towers: the 2B and 4B share one, the 8B and 32B another (and tie their embeddings only with the first)
_SMALL_VISION = dict(depth=24, hidden_size=1024, intermediate_size=4096, deepstack_visual_indexes=[5, 11, 17])
_LARGE_VISION = dict(depth=27, hidden_size=1152, intermediate_size=4304, deepstack_visual_indexes=[8, 16, 24])


def _architecture(hidden: int, intermediate: int, layers: int, heads: int, vision: dict) -> dict:
    tie = vision is _SMALL_VISION
    text = dict(hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers, num_attention_heads=heads,
                num_key_value_heads=8, head_dim=128, vocab_size=VOCAB, tie_word_embeddings=tie)
    return dict(text=text, tie_word_embeddings=tie,
                vision=dict(vision, num_heads=16, out_hidden_size=hidden, num_position_embeddings=2304))


ARCHITECTURES = {}
for _size, _arch in {"2B": _architecture(2048, 6144, 28, 16, _SMALL_VISION),
                     "4B": _architecture(2560, 9728, 36, 32, _SMALL_VISION),
                     "8B": _architecture(4096, 12288, 36, 32, _LARGE_VISION),
                     "32B": _architecture(5120, 25600, 64, 64, _LARGE_VISION)}.items():
    for _kind in ("Instruct", "Thinking"):  # a Thinking checkpoint has its Instruct sibling's shapes
        ARCHITECTURES[f"Qwen/Qwen3-VL-{_size}-{_kind}"] = _arch


def qwen3vl_config(arch: dict, token_ids: dict | None = None):
    """A Qwen3VLConfig of one of the ARCHITECTURES (or any dict of the same shape, its text settings first); `token_ids`
    replaces Qwen's special token ids (a smaller tokenizer's)."""
    from transformers import Qwen3VLConfig

    ids = {**QWEN_TOKEN_IDS, **(token_ids or {})}
    head_dim = arch["text"]["head_dim"]
    section = [24, 20, 20] if head_dim == 128 else [head_dim // 4, head_dim // 8, head_dim // 8]
    text = {"max_position_embeddings": 262144, "rms_norm_eps": 1e-6, **arch["text"],
            "pad_token_id": ids["<|endoftext|>"], "rope_parameters": {
                "rope_type": "default", "rope_theta": 5e6, "mrope_section": section, "mrope_interleaved": True}}
    vision = dict(arch["vision"], patch_size=16, spatial_merge_size=2, temporal_patch_size=2)
    return Qwen3VLConfig(text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
                         video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
                         vision_end_token_id=ids["<|vision_end|>"],
                         tie_word_embeddings=arch.get("tie_word_embeddings", False))
