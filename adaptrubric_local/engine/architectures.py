"""The published Qwen3-VL architectures, 2B, 4B, 8B and 32B (sizes from the checkpoints' config.json; a
Thinking checkpoint has its Instruct sibling's), so that memory plans and GPU benchmarks can be made for a
model whose weights are not on this machine: a plan counts its parameters on the meta device, a
benchmark builds it with random weights. Knows nothing about
checkpoints' weights, tokenizers or rubrics.
"""
from __future__ import annotations

# Qwen's special token ids (tokenizer_config.json of every Qwen3-VL checkpoint)
QWEN_TOKEN_IDS = {"<|endoftext|>": 151643, "<|im_end|>": 151645, "<|vision_start|>": 151652,
                  "<|vision_end|>": 151653, "<|image_pad|>": 151655, "<|video_pad|>": 151656}
VOCAB = 151936

ARCHITECTURES = {
    "Qwen/Qwen3-VL-4B-Instruct": dict(
        text=dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
                  num_key_value_heads=8, head_dim=128, vocab_size=VOCAB, tie_word_embeddings=True),
        vision=dict(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, out_hidden_size=2560,
                    deepstack_visual_indexes=[5, 11, 17], num_position_embeddings=2304),
        tie_word_embeddings=True),
    "Qwen/Qwen3-VL-8B-Instruct": dict(
        text=dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                  num_key_value_heads=8, head_dim=128, vocab_size=VOCAB, tie_word_embeddings=False),
        vision=dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, out_hidden_size=4096,
                    deepstack_visual_indexes=[8, 16, 24], num_position_embeddings=2304),
        tie_word_embeddings=False),
}
ARCHITECTURES.update({
    "Qwen/Qwen3-VL-2B-Instruct": dict(
        text=dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                  num_key_value_heads=8, head_dim=128, vocab_size=VOCAB, tie_word_embeddings=True),
        vision=dict(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, out_hidden_size=2048,
                    deepstack_visual_indexes=[5, 11, 17], num_position_embeddings=2304),
        tie_word_embeddings=True),
    "Qwen/Qwen3-VL-32B-Instruct": dict(
        text=dict(hidden_size=5120, intermediate_size=25600, num_hidden_layers=64, num_attention_heads=64,
                  num_key_value_heads=8, head_dim=128, vocab_size=VOCAB, tie_word_embeddings=False),
        vision=dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, out_hidden_size=5120,
                    deepstack_visual_indexes=[8, 16, 24], num_position_embeddings=2304),
        tie_word_embeddings=False),
})
for _size in ("2B", "4B", "8B", "32B"):  # a Thinking checkpoint has its Instruct sibling's shapes
    ARCHITECTURES[f"Qwen/Qwen3-VL-{_size}-Thinking"] = ARCHITECTURES[f"Qwen/Qwen3-VL-{_size}-Instruct"]


def qwen3vl_config(arch: dict, token_ids: dict | None = None):
    """A Qwen3VLConfig of one of the ARCHITECTURES (or any dict of the same shape); `token_ids`
    replaces Qwen's special token ids (a smaller tokenizer's)."""
    from transformers import Qwen3VLConfig

    ids = {**QWEN_TOKEN_IDS, **(token_ids or {})}
    head_dim = arch["text"]["head_dim"]
    section = [24, 20, 20] if head_dim == 128 else [head_dim // 4, head_dim // 8, head_dim // 8]
    text = dict(arch["text"], max_position_embeddings=262144, rms_norm_eps=1e-6, pad_token_id=ids["<|endoftext|>"],
                rope_parameters={"rope_type": "default", "rope_theta": 5e6, "mrope_section": section,
                                 "mrope_interleaved": True})
    vision = dict(arch["vision"], patch_size=16, spatial_merge_size=2, temporal_patch_size=2)
    return Qwen3VLConfig(text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
                         video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
                         vision_end_token_id=ids["<|vision_end|>"],
                         tie_word_embeddings=arch.get("tie_word_embeddings", False))
