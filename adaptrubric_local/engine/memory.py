"""What one `generate` call of Qwen3-VL allocates, per attention implementation: the memory model the
transformers engine sizes its groups with, and that `eval/prefill_memory.py` checks against a measured
peak.

The terms are read off the code that runs (transformers 5.24 `generation/utils.py`, `masking_utils.py`,
`integrations/sdpa_attention.py`, `models/qwen3_vl/modeling_qwen3_vl.py`; torch's SDPA and CUDA
`masked_scatter`), for a group of B rows left-padded to width L (T = B x L padded tokens), V visual tokens
and P = 4 V vision patches, at the compute dtype's b bytes. The peak is the largest of five phases:
- vision: the tower's widest block, the deepstack features made so far, the pixels;
- merge: the tower's outputs (which 5.24's `generate` keeps in `mm_encoder_outputs` until it returns,
  5.17 only inside the prefill forward: `Runtime`), the text embeddings and `masked_scatter`'s copies;
- attention and mlp (the last language layer's two halves): the same outputs, the layer inputs, the KV
  cache of every layer, the implementation's attention mask, and the attention part's widest moment
  or the MLP's;
- decode: the outputs kept, the KV cache at its final length and one layer's concatenation.
Attention implementations: `sdpa` (a (B, 1, L, L) bool mask whenever rows differ in length, its
query-dtype copy in every SDPA call, K/V repeated per head unless `TRANSFORMERS_SDPA_FORCE_GQA=1`),
`sdpa_padded_prefill` (engine/attention.py: no L x L mask), `flash_attention_2/3` (unpadded copies of
q, k, v and the output; not measured) and `eager` (the full attention matrix). Knows nothing about
batching policy or verdicts.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache

GiB = 1024 ** 3
GPU_MEMORY_FRACTION = 0.85  # share of the free GPU memory (after loading) that groups may fill
PATHS = ("sdpa", "sdpa_padded_prefill", "flash_attention_2", "flash_attention_3", "eager")


@dataclass(frozen=True)
class Sizes:
    """The sizes of a Qwen3-VL config the model reads."""

    layers: int
    hidden: int
    intermediate: int
    q_dim: int
    kv_dim: int
    head_dim: int
    heads: int
    v_hidden: int
    v_intermediate: int
    v_heads: int
    out: int
    deepstack: int
    deepstack_before_last: int = 0  # deepstack features made before the tower's last block
    patch_values: int = 1536  # C x T x P x P = 3 x 2 x 16 x 16 values a patch
    merge: int = 4  # 2 x 2 patches a visual token
    pos_taps: int = 4  # bilinear interpolation of the learned position table

    @classmethod
    def of(cls, config) -> Sizes:
        t, v = getattr(config, "text_config", config), getattr(config, "vision_config", None)  # v: None passes
        head_dim = getattr(t, "head_dim", None) or t.hidden_size // t.num_attention_heads
        kv_heads = getattr(t, "num_key_value_heads", None) or t.num_attention_heads
        ds = list(getattr(v, "deepstack_visual_indexes", None) or [])
        return cls(layers=t.num_hidden_layers, hidden=t.hidden_size, intermediate=t.intermediate_size,
                   q_dim=t.num_attention_heads * head_dim, kv_dim=kv_heads * head_dim, head_dim=head_dim,
                   heads=t.num_attention_heads, v_hidden=getattr(v, "hidden_size", 0),
                   v_intermediate=getattr(v, "intermediate_size", 0), v_heads=getattr(v, "num_heads", 1),
                   out=getattr(v, "out_hidden_size", t.hidden_size), deepstack=len(ds),
                   deepstack_before_last=sum(i < v.depth - 1 for i in ds),
                   patch_values=3 * getattr(v, "temporal_patch_size", 2) * getattr(v, "patch_size", 16) ** 2,
                   merge=(getattr(v, "spatial_merge_size", 2) or 2) ** 2)


@dataclass
class Group:
    """One generate call's shape: each row's prompt tokens and visual tokens, new tokens, samples."""

    rows: list[int]
    visual: list[int]
    new_tokens: int = 1
    votes: int = 1
    left_padded: bool | None = None  # default: whether the rows differ in length


@dataclass
class Estimate:
    """Bytes of each phase, by term; `total` is the largest phase."""

    phases: dict = field(default_factory=dict)
    detail: dict = field(default_factory=dict)  # the attention phase's candidates for its widest moment

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=lambda p: sum(self.phases[p].values()))

    @property
    def total(self) -> float:
        return max(sum(terms.values()) for terms in self.phases.values()) if self.phases else 0.0


@dataclass(frozen=True)
class Runtime:
    """What the installed transformers does that changes the arithmetic."""

    pre_encodes: bool = True  # generate runs the tower before prefill and keeps its outputs until it returns
    repeats_kv_with_mask: bool = True  # SDPA's function repeats K/V per head when it is given a mask


@lru_cache(maxsize=4)
def _runtime(force_gqa: str) -> Runtime:
    import torch
    from transformers.generation.utils import GenerationMixin
    from transformers.integrations.sdpa_attention import use_gqa_in_sdpa

    kv = torch.zeros(1, 1, 1, 128)
    return Runtime(pre_encodes=hasattr(GenerationMixin, "_prepare_multimodal_encoder_kwargs_for_generation"),
                   repeats_kv_with_mask=not use_gqa_in_sdpa(torch.ones(1, 1, 1, 1, dtype=torch.bool), kv, kv))


def runtime() -> Runtime:
    """The installed transformers' behaviour: whether `generate` encodes images before the prefill
    (5.24, `mm_encoder_outputs`; 5.17 inside the prefill forward), and whether K/V are repeated with a
    mask (transformers' own `use_gqa_in_sdpa`: 5.24 not with TRANSFORMERS_SDPA_FORCE_GQA=1)."""
    return _runtime(os.environ.get("TRANSFORMERS_SDPA_FORCE_GQA", ""))


def estimate(s: Sizes, g: Group, attn: str = "sdpa", b: int = 2, device: str = "cuda",
             rt: Runtime | None = None) -> Estimate:
    """Peak bytes of one generate call of group `g` (see the module docstring), by phase and term."""
    rt = rt or runtime()
    if attn not in PATHS:
        attn = "sdpa"
    k, B, L = g.votes, len(g.rows) * g.votes, max(g.rows, default=0)
    T = B * L
    V = sum(g.visual)
    P = 4 * V  # vision patches
    Vk = V * k
    cuda = device == "cuda"
    # equal rows: transformers skips the mask (SDPA's is_causal)
    masked = len(set(g.rows)) > 1 if g.left_padded is None else g.left_padded
    f32 = 4
    inputs = 3 * 8 * T + (4 * 8 * T)  # ids, 2-D mask, token types (int64); 4 x B x L position ids
    pixels = P * s.patch_values * b + (0 if cuda else P * s.patch_values // 2)  # + the uint8 patches in host memory
    kept = {"inputs": inputs, "pixels": pixels}
    # ---- vision: the widest block (q and k rotated in float32 while qkv, the input and its norm live), with
    # the float32 position embeddings and rotary tables kept through the tower
    vh, vi = s.v_hidden, s.v_intermediate
    rotary = P * vh * (5 * b + 6 * f32)  # x, norm, qkv (3); q, k in fp32, q_embed, two rotary temporaries
    mlp_v = P * (3 * vh * b + 2 * vi * b)  # x, x + attn, norm; fc1 and its activation
    pos = P * vh * (b + s.pos_taps * b + s.pos_taps * f32)  # patch embeddings, gathered taps, weighted (fp32)
    tables = P * vh * f32 + 2 * P * (vh // max(1, s.v_heads)) * f32  # summed position embeddings; cos, sin
    vision = {**kept, "vision_tables": tables, "vision_block": max(rotary, mlp_v, pos - P * vh * f32),
              "deepstack_so_far": s.deepstack_before_last * V * s.out * b}
    # ---- what the tower leaves: kept by generate until it returns (mm_encoder_outputs)
    out_kept = k * P * vh * b + Vk * s.out * b * (1 + s.deepstack)
    h = s.hidden
    scatter = 2 * T * h * b + (9 * T * h if cuda else 0)  # CUDA masked_scatter: int64 prefix sum, bool mask
    after = T * h * b + (s.deepstack * Vk * s.out * b if rt.pre_encodes else 0)  # + deepstack concatenated
    merge = {**kept, "vision_outputs": out_kept, "image_embeds": Vk * s.out * b,
             ("masked_scatter" if scatter >= after else "merged"): max(scatter, after)}
    # ---- language model, last layer
    kv = 2 * s.layers * T * s.kv_dim * b
    q, kvd, i = s.q_dim, s.kv_dim, s.intermediate
    mlp = T * (2 * h * b + 3 * i * b)  # residual, its norm; act(gate), up, their product
    # normed input, q, and RMSNorm's widest moment over q: two float32 copies (layer input: below)
    q_norm = T * (h * b + q * b + 8 * q)
    rope = T * b * (h + q + kvd + 3 * q)
    if attn == "sdpa":
        sdpa = T * b * (h + 2 * q) + (2 * T * q * b if masked and rt.repeats_kv_with_mask else 0)
        if masked:
            sdpa += B * L * L * b  # SDPA turns the bool mask into an additive mask of the query's dtype
            if cuda and L % 8:
                sdpa += B * L * (L + 8 - L % 8) * b  # the memory-efficient kernel pads it to 8 columns
        attention = sdpa
    elif attn == "sdpa_padded_prefill":
        attention = T * b * (h + 2 * q) + L * q * b  # zeroed output, one row's SDPA output at a time
    elif attn.startswith("flash_attention"):
        attention = T * b * (h + q) + T * b * (3 * q + 2 * kvd)  # unpadded q, k, v, output, padded output
    else:  # eager: scores, scaled scores and the float32 softmax over B x heads x L x L
        attention = T * b * (h + 2 * q) + B * s.heads * L * L * (2 * b + f32)
    # the layer's input; after a deepstack layer also the output it was made from (`layer_outputs`)
    layer_input = T * h * b * (2 if s.layers - 1 <= s.deepstack else 1)
    language = {**kept, "vision_outputs": out_kept, "image_embeds": Vk * s.out * b,
                "deepstack_embeds": s.deepstack * Vk * s.out * b if rt.pre_encodes else 0, "text_embeds": T * h * b,
                "rotary": 2 * T * s.head_dim * b, "kv_cache": kv, "layer_input": layer_input}
    if attn == "sdpa" and masked:
        language["mask_bool"] = B * L * L
    elif attn == "eager" and masked:
        language["mask_float"] = B * L * L * b
    attention_phase = {**language, "attention": max(q_norm, rope, attention)}
    mlp_phase = {**language, "mlp": mlp}
    # ---- decode: the KV cache at its final length, one layer concatenated
    final = T + B * g.new_tokens  # the end of prefill holds the last hidden states; the end of decoding the
    decode = {**kept, "vision_outputs": out_kept,  # KV cache at its final length and one layer's concatenation
              "kv_cache": max(kv + T * h * b, 2 * (s.layers + 1) * final * kvd * b)}
    if not rt.pre_encodes:  # the tower's outputs live only inside the prefill forward
        decode["vision_outputs"] = 0
    return Estimate({"vision": vision, "merge": merge, "attention": attention_phase, "mlp": mlp_phase,
                     "decode": decode}, {"q_norm": q_norm, "rope": rope, "attention_call": attention})


def tokens_bound(s: Sizes, attn: str, b: int, budget: float, device: str = "cuda") -> int:
    """Padded tokens that fit `budget` bytes for rows that cost only linearly: one row of equal-length
    prompts of visual tokens (the most a token costs apart from the L x L mask); the start of the
    engine's token budget on a GPU, with the mask checked per group by `estimate`."""
    probe = 8192
    per_token = estimate(s, Group([probe], [probe], 0), attn, b, device).total / probe
    return max(4096, int(budget // per_token))


def free_budget(free_bytes: float) -> float:
    """Bytes of free GPU memory that groups may fill."""
    return free_bytes * GPU_MEMORY_FRACTION


def fits(s: Sizes, g: Group, attn: str, b: int, budget: float | None, device: str = "cuda") -> bool:
    return budget is None or estimate(s, g, attn, b, device).total <= budget


def rows_that_fit(s: Sizes, tokens: int, visual: int, new_tokens: int, attn: str, b: int, budget: float,
                  device: str = "cuda", most: int = 1024) -> int:
    """How many left-padded rows of `tokens` prompt tokens (`visual` of them visual) one group can hold
    within `budget` bytes (0: not even one)."""
    n = 0
    while n < most and fits(s, Group([tokens] * (n + 1), [visual] * (n + 1), new_tokens, left_padded=n > 0),
                            attn, b, budget, device):
        n += 1
    return n
