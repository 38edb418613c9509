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


def test_a_left_padded_prefill_builds_no_l_by_l_mask(tiny_engine, tmp_path):
    """Through the whole model on the per-row path (the CPU default): no (B, 1, L, L) mask, no
    query-dtype copy of one and no repeated K/V are made for the prefill of a left-padded batch; stock
    "sdpa" on the same batch makes all three (what engine/memory.py counts for that path)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from adaptrubric_local.engine.base import Request
    from adaptrubric_local.engine.hf import HFEngine

    from conftest import make_png

    class Shapes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.seen += [tuple(t.shape) for t in (out if isinstance(out, (tuple, list)) else [out])
                          if isinstance(t, torch.Tensor)]
            return out

    reqs = [Request(prompt="Judge this long one. " * 30, images=[make_png(tmp_path / "a.png", 1)], max_new_tokens=2),
            Request(prompt="Short.", max_new_tokens=2)]
    widths = {}
    for attn in ("sdpa_padded_prefill", "sdpa"):
        tiny_engine.model.set_attn_implementation(attention.register() if attn != "sdpa" else "sdpa")
        try:
            eng = HFEngine(tiny_engine.config, loaded=(tiny_engine.model, tiny_engine.processor))
            with Shapes() as mode:
                outs = eng.generate(reqs)
            eng.close()
        finally:
            tiny_engine.model.set_attn_implementation(attention.register())
        L = outs[0].prompt_tokens
        assert outs[1].prompt_tokens < L
        text = tiny_engine.model.config.text_config
        rep = text.num_attention_heads // text.num_key_value_heads
        widths[attn] = {"mask": any(s[-2:] == (L, L) for s in mode.seen),  # repeat_kv expands (B, kv, rep, L, d)
                        "repeated_kv": any(len(s) == 5 and s[2] == rep and s[3] == L for s in mode.seen)}
    assert widths["sdpa_padded_prefill"] == {"mask": False, "repeated_kv": False}, widths
    assert widths["sdpa"]["mask"], widths
