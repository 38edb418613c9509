"""Build a tiny random-weight Qwen3-VL (model, tokenizer, processor) entirely offline and save it
with `save_pretrained`, so the transformers engine can load it through exactly the path it uses
for a real checkpoint. For tests, demos and benchmarks on machines without weights or a GPU.

The tokenizer is a small byte-level BPE trained on a text corpus the caller gives (the package's
prompts and bank: `adaptrubric_local.dry_run.tokenizer_corpus`) with Qwen2's pre-tokenizer regex,
plus Qwen's special tokens and a chat template that emits `<|vision_start|><|image_pad|><|vision_end|>`
per image. Knows nothing about rubrics or prompts.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Optional, Sequence

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                 "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]

QWEN2_PRETOKENIZE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                     r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% elif part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

PIXELS_PER_TOKEN = 32 * 32  # patch 16, merge 2
# the text attention's head size: vLLM's CPU attention accepts 32, 64, 80, 96, 112, 128, ... (not 16), its
# GPU kernels multiples of 32 up to 256
TEXT_HEAD_DIM = 32


def build_tokenizer(corpus: Sequence[str], vocab_size: int = 1200):
    """A small Qwen2-style byte-level BPE tokenizer trained on `corpus`, with Qwen's special tokens and
    chat template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(list(corpus), trainer=trainer)
    with tempfile.TemporaryDirectory() as d:
        tok.model.save(d)
        vocab = json.loads(Path(d, "vocab.json").read_text())
        merges = [tuple(line.split(" ")) for line in Path(d, "merges.txt").read_text().splitlines()
                  if line and not line.startswith("#version")]
    hf = Qwen2Tokenizer(vocab=vocab, merges=merges, unk_token=None, bos_token=None, eos_token="<|im_end|>",
                        pad_token="<|endoftext|>", add_prefix_space=False)
    hf.add_special_tokens({"additional_special_tokens": QWEN_SPECIALS[1:]})
    hf.add_tokens(["<|endoftext|>"], special_tokens=True)
    hf.chat_template = CHAT_TEMPLATE
    hf.padding_side = "left"
    return hf


def build_processor(tokenizer, max_pixels: int = 1024 * PIXELS_PER_TOKEN, min_pixels: int = 4 * PIXELS_PER_TOKEN):
    """A Qwen3-VL processor with Qwen3-VL's (not Qwen2-VL's) image settings."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    size = {"shortest_edge": min_pixels, "longest_edge": max_pixels}
    image_processor = Qwen2VLImageProcessor(patch_size=16, temporal_patch_size=2, merge_size=2,
                                            image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], size=size)
    video_processor = Qwen3VLVideoProcessor(patch_size=16, temporal_patch_size=2, merge_size=2,
                                            image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    return Qwen3VLProcessor(image_processor=image_processor, tokenizer=tokenizer, video_processor=video_processor,
                            chat_template=CHAT_TEMPLATE)


def build_config(tokenizer, hidden: int = 64, layers: int = 2, vision_depth: int = 2, vision_hidden: int = 32,
                 head_dim: int = TEXT_HEAD_DIM):
    """A tiny Qwen3VLConfig whose special token ids come from `tokenizer`. The text attention's
    `head_dim` (default 32) is one vLLM's CPU and GPU attention kernels accept; M-RoPE's sections
    (temporal, height, width) must sum to head_dim / 2: [8, 4, 4] for 32."""
    if head_dim % 8:
        raise ValueError(f"head_dim must be a multiple of 8 (M-RoPE sections 2:1:1 of head_dim / 2), got {head_dim}")
    quarter = head_dim // 8
    from transformers import Qwen3VLConfig

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIALS}
    text = dict(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 2,
                num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, head_dim=head_dim,
                max_position_embeddings=32768, pad_token_id=ids["<|endoftext|>"],
                rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                 "mrope_section": [2 * quarter, quarter, quarter], "mrope_interleaved": True})
    vision = dict(depth=vision_depth, hidden_size=vision_hidden, intermediate_size=vision_hidden * 2, num_heads=2,
                  patch_size=16, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=hidden,
                  num_position_embeddings=256, deepstack_visual_indexes=[vision_depth - 1])
    cfg = Qwen3VLConfig(text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
                        video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
                        vision_end_token_id=ids["<|vision_end|>"])
    cfg.eos_token_id = ids["<|im_end|>"]
    cfg.pad_token_id = ids["<|endoftext|>"]
    return cfg


def make_tiny_model(out: str | Path, corpus: Sequence[str], seed: int = 0,
                    max_pixels: int = 1024 * PIXELS_PER_TOKEN, vocab_size: Optional[int] = None) -> Path:
    """Build and save a tiny random Qwen3-VL to `out`, its tokenizer trained on `corpus`; returns the
    folder. `vocab_size` pads the embedding and head to that many rows (151936 is Qwen3-VL's: the cost
    that dominates real training, the LM head over the vocabulary, then shows on the CPU; the extra
    rows are never tokenised)."""
    import torch
    from transformers import GenerationConfig, Qwen3VLForConditionalGeneration

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(corpus)
    processor = build_processor(tokenizer, max_pixels=max_pixels)
    config = build_config(tokenizer)
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config).eval()
    if vocab_size and vocab_size > config.text_config.vocab_size:
        model.resize_token_embeddings(vocab_size, mean_resizing=False)
    model.generation_config = GenerationConfig(eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id,
                                               do_sample=False)
    model.save_pretrained(out, safe_serialization=True)
    processor.save_pretrained(out)
    (out / "README.md").write_text("Tiny random-weight Qwen3-VL built by `adaptrubric make-tiny-model` for tests "
                                   "and smoke runs. Its outputs are noise.\n")
    return out
