"""An attention function for left-padded batched prefill, registered with transformers'
AttentionInterface as "sdpa_padded_prefill", with a mask function of its own.

With a padding mask transformers builds a (B, 1, L, L) boolean mask, SDPA leaves its causal fast path
and K/V are repeated per head (engine/memory.py). For a left-padded prefill the mask function returns
the (B, L) padding mask instead and each row's unpadded part runs through the causal kernel on its
own; padded query positions get zeros. Anything else (decode steps, the vision tower, right padding,
a static cache, other masks) gets transformers' own SDPA unchanged. Knows nothing about models.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

NAME = "sdpa_padded_prefill"


def _left_pads_2d(mask: torch.Tensor) -> torch.Tensor | None:
    """Per-row left-padding lengths if the (B, K) boolean `mask` is zeros then ones in every row."""
    pads = (~mask).sum(-1)
    ar = torch.arange(mask.shape[-1], device=mask.device)
    return pads if torch.equal(mask, ar[None, :] >= pads[:, None]) else None


def _left_pads(mask: torch.Tensor) -> torch.Tensor | None:
    """Per-row left-padding lengths if `mask` (B, 1, Q, K) is exactly left padding + causal, else None."""
    _, _, q, k = mask.shape
    pads = _left_pads_2d(mask[:, 0, -1, :])
    causal = pads is not None and all(  # inside the real part: the first real query sees only itself
        p < q and bool(mask[i, 0, p, p]) and not (p + 1 < k and bool(mask[i, 0, p, p + 1]))
        for i, p in enumerate(pads.tolist()))
    return pads if causal else None


def padded_prefill_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                        attention_mask=None, **kwargs):
    """transformers mask function: the (B, L) padding mask for the causal prefill of a left-padded batch
    (the attention function below reads it), else exactly what "sdpa" gets."""
    from transformers.masking_utils import causal_mask_function, sdpa_mask

    mask_function = mask_function or causal_mask_function
    if (isinstance(q_length, int) and q_length > 1 and q_length == kv_length and isinstance(q_offset, int)
            and q_offset == 0 and kv_offset == 0 and mask_function is causal_mask_function
            and isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 2
            and attention_mask.shape == (batch_size, kv_length) and not bool(attention_mask.all())):
        mask = attention_mask.to(torch.bool)
        if _left_pads_2d(mask) is not None:
            return mask
    return sdpa_mask(batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset,
                     kv_offset=kv_offset, mask_function=mask_function, attention_mask=attention_mask, **kwargs)


def padded_prefill_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                        **kwargs):
    """transformers attention function: per-row causal SDPA for left-padded prefill, else stock SDPA."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    q_len, k_len = query.shape[2], key.shape[2]
    plain = (attention_mask is None or attention_mask.dtype != torch.bool or attention_mask.dim() not in (2, 4)
             or q_len != k_len or q_len == 1 or not causal or dropout or kwargs.get("position_bias") is not None
             or kwargs.get("softcap") is not None)
    pads = None if plain else (_left_pads_2d(attention_mask) if attention_mask.dim() == 2
                               else _left_pads(attention_mask))
    if pads is None:
        if attention_mask is not None and attention_mask.dim() == 2:  # never expected: the mask function's own
            raise ValueError(f"{NAME}: a (B, L) mask that is not left padding for a causal prefill")
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    groups = getattr(module, "num_key_value_groups", 1)
    b, h, _, _ = query.shape
    out = query.new_zeros(b, q_len, h, value.shape[-1])
    for i in range(b):
        p = int(pads[i])
        o = F.scaled_dot_product_attention(query[i:i + 1, :, p:], key[i:i + 1, :, p:], value[i:i + 1, :, p:],
                                           is_causal=True, scale=scaling, enable_gqa=groups > 1)
        out[i, p:] = o[0].transpose(0, 1)
        del o  # before the next row's output exists
    return out, None


def register() -> str:
    """Register the function with transformers (idempotent); returns its attn_implementation name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    AttentionInterface.register(NAME, padded_prefill_sdpa)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, padded_prefill_mask)
    return NAME
