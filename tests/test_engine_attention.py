"""The left-padded prefill attention (engine/attention.py): which masks it takes over, and its output
against transformers' own SDPA on a left-padded batch. The whole model through it is checked in
test_engine_hf.py (test_padded_prefill_attention_matches_stock_sdpa)."""
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from adaptrubric_local.engine import attention


def _left_padded_causal(pads: list[int], n: int) -> torch.Tensor:
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    rows = [causal & (torch.arange(n) >= p)[None, :] for p in pads]
    return torch.stack(rows)[:, None]


def test_only_left_padding_with_causal_is_recognised():
    mask = _left_padded_causal([2, 0], 5)
    assert attention._left_pads(mask).tolist() == [2, 0]
    right_padded = mask.flip(-1)
    assert attention._left_pads(right_padded) is None
    full = torch.ones(2, 1, 5, 5, dtype=torch.bool)  # not causal
    assert attention._left_pads(full) is None


def test_padded_rows_match_stock_sdpa_on_their_real_positions():
    torch.manual_seed(0)
    b, h, n, d = 2, 4, 6, 8
    q, k, v = (torch.randn(b, h, n, d) for _ in range(3))
    mask = _left_padded_causal([3, 0], n)

    class Module(torch.nn.Module):
        is_causal = True
        num_key_value_groups = 1

    module = Module()
    ours, _ = attention.padded_prefill_sdpa(module, q, k, v, mask)
    ref, _ = sdpa_attention_forward(module, q, k, v, mask)
    assert torch.allclose(ours[0, 3:], ref[0, 3:], atol=1e-5) and torch.allclose(ours[1], ref[1], atol=1e-5)
    assert torch.count_nonzero(ours[0, :3]) == 0  # padded queries get zeros


def test_register_is_idempotent_and_names_the_implementation():
    from transformers import AttentionInterface

    assert attention.register() == attention.register() == "sdpa_padded_prefill"
    assert AttentionInterface._global_mapping["sdpa_padded_prefill"] is attention.padded_prefill_sdpa
