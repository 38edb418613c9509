"""Generation controls of the transformers engine (engine/generation.py): watched-token probabilities
recorded per step and aligned with the decoded text, per-row stopping on token ids (both on the small
trained tokenizer and the real Qwen3 one), and the batch token budget derived from GPU memory."""
import pytest
import torch


def test_watched_token_probabilities_align_with_text(token_engine):
    from adaptrubric_local.engine.base import Output
    from adaptrubric_local.engine.generation import WatchRecorder
    from adaptrubric_local.pipeline import p_success

    tok = token_engine.tokenizer
    ids = tok.encode("Looks done.\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none",
                     add_special_tokens=False)
    vocab = token_engine.model.config.text_config.vocab_size
    one, zero = tok.convert_tokens_to_ids("1"), tok.convert_tokens_to_ids("0")
    rec = WatchRecorder([zero, one])
    for _ in ids:  # what generate would feed it, step by step
        scores = torch.zeros(1, vocab)
        scores[0, one], scores[0, zero] = 3.0, 1.0
        assert rec(None, scores) is scores
    probs = rec.stacked()[0]
    assert probs.shape == (len(ids), 2)
    text, token_probs, n, eos = token_engine._decode(torch.tensor(ids), probs, ["0", "1"], ("0", "1"))
    assert n == len(ids) and not eos and text.endswith("MISSING_EVIDENCE: none")
    hit = [p for p in token_probs if text[p.offset] == "1"]
    assert hit and hit[0].probs["1"] > hit[0].probs["0"]
    p = p_success(Output(text=text, token_probs=token_probs))
    assert p == pytest.approx(torch.softmax(torch.tensor([1.0, 3.0]), 0)[1].item(), rel=1e-4)


def test_row_stop_on_token_ids(token_engine):
    from adaptrubric_local.engine.generation import RowStop, newline_table

    tok = token_engine.tokenizer
    table = newline_table(tok, token_engine.model.get_output_embeddings().weight.shape[0])
    assert table[tok.convert_tokens_to_ids("Ċ")] if "Ċ" in tok.get_vocab() else table.any()
    texts = ["x\n  MISSING_EVIDENCE: indented\nMISSING_EVIDENCE: none\nmore",  # indented line is not a match
             "MISSING_EVIDENCE: none",  # no newline yet: not complete
             "a\nMISSING_EVIDENCE: none\n"]
    rows = [tok.encode(t, add_special_tokens=False) for t in texts]
    stop = RowStop(tok, table, ["MISSING_EVIDENCE:", "MISSING_EVIDENCE:", None], [100, 100, 4], prompt_len=2)
    width = max(map(len, rows))
    done_at = {}
    for j in range(1, width + 1):
        ids = torch.tensor([[0, 0, *(r + r[-1:] * width)[:j]] for r in rows])
        done = stop(ids, None)
        for b in range(3):
            if bool(done[b]) and b not in done_at:
                done_at[b] = j
    first_line = len(tok.encode("x\n  MISSING_EVIDENCE: indented\nMISSING_EVIDENCE: none\n", add_special_tokens=False))
    assert done_at[0] == first_line and stop.ends[0] == first_line
    assert 1 not in done_at  # never completed a line
    assert done_at[2] == 4 and 2 not in stop.ends  # its own cap, not the line (it watches none)


def test_watched_offsets_are_the_lengths_of_the_decoded_prefixes():
    """Decoded piece by piece, each watched digit's offset is still the length of the whole prefix's text,
    on the real Qwen3 tokenizer with multi-byte characters, an emoji and a special token in the reply."""
    from adaptrubric_local.engine.base import watched_offsets
    from adaptrubric_local.engine.tiny import qwen3_tokenizer

    tok = qwen3_tokenizer()
    text = "<think>\nstep 10 of 21: 价格 109 元, é 0.5 😀1\n</think>\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\n"
    ids = [*tok.encode(text * 3), tok.convert_tokens_to_ids("<|im_end|>"), *tok.encode(" 0 1")]
    wanted = {tok.convert_tokens_to_ids("0"), tok.convert_tokens_to_ids("1")}
    expected = [(j, len(tok.decode(ids[:j], skip_special_tokens=True))) for j, t in enumerate(ids) if t in wanted]
    assert len(expected) > 20 and list(watched_offsets(tok, ids, wanted)) == expected
