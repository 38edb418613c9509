"""What is thinking (thinking.py), and everything that must agree on it: the stop criterion of the
transformers engine, the verdict parser, P(SCORE=1), the distillation records and the remote engine.
The engine tests run transformers' real `generate` with its real stopping criteria on the tiny Qwen3-VL
built on the real Qwen3 tokenizer, scripted to emit a thinking model's output token by token."""
import pytest
import torch
from forced_generation import ANSWER, DRAFT, force

from adaptrubric_local import AdaptRubric, PipelineConfig, load_trajectories
from adaptrubric_local.engine.base import Output, Request, TokenProbs, cut_after_line
from adaptrubric_local.pipeline import VERDICT_LAST_LINE, p_success
from adaptrubric_local.thinking import prompt_opens, split, visible_line
from adaptrubric_local.verdict import parse_verdict, score_value_offset

CHATTER = "Let me know if you need anything else. " * 8


# ---------------------------------------------------------------------------------------------- the definition
@pytest.mark.parametrize("text,opened,answer,thinking,unfinished", [
    ("SCORE: 1", False, "SCORE: 1", None, False),
    ("<think>draft</think>\n\nSCORE: 0", False, "SCORE: 0", "draft", False),
    ("draft\n</think>\n\nSCORE: 0", False, "SCORE: 0", "draft", False),  # the prompt opened it
    ("draft\n</think>\n\nSCORE: 0", True, "SCORE: 0", "draft", False),
    ("draft with SCORE: 1", True, "", "draft with SCORE: 1", True),  # a Thinking checkpoint cut by the cap
    ("<think>draft with SCORE: 1", False, "", "draft with SCORE: 1", True),
    ("<think>a</think>x<think>b</think>\nSCORE: 1", False, "x\nSCORE: 1", "a\n\nb", False),
    ("", True, "", None, True),
])
def test_split(text, opened, answer, thinking, unfinished):
    s = split(text, opened)
    assert (s.answer, s.thinking, s.unfinished) == (answer, thinking, unfinished)
    assert "".join(text[a:b] for a, b in s.spans) == s.answer


def test_the_prompt_of_a_thinking_template_opens_the_reply_inside_thinking():
    assert prompt_opens("<|im_start|>user\nJudge.<|im_end|>\n<|im_start|>assistant\n<think>\n")
    assert not prompt_opens("<|im_start|>user\nJudge.<|im_end|>\n<|im_start|>assistant\n")
    # Qwen3's enable_thinking=False closes the block in the prompt; a <think> in the user's text is not the reply's
    assert not prompt_opens("<|im_start|>user\nJudge.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not prompt_opens("<|im_start|>user\nwhy <think>?<|im_end|>\n<|im_start|>assistant\n")


def test_visible_line():
    assert visible_line("MISSING_EVIDENCE: none", False) == ("MISSING_EVIDENCE: none", False)
    assert visible_line("MISSING_EVIDENCE: none", True) == (None, True)
    assert visible_line("</think>MISSING_EVIDENCE: none", True) == ("MISSING_EVIDENCE: none", False)
    assert visible_line("MISSING_EVIDENCE: none <think>", False) == (None, True)


@pytest.mark.parametrize("opened", [False, True])
def test_parser_records_cut_and_probability_agree_on_what_is_thinking(opened):
    text = ("" if opened else "<think>\n") + DRAFT + "</think>\n\n" + ANSWER
    v = parse_verdict(text, opened)
    assert v.status == "ok" and v.score == 0 and v.raw == text
    kept = split(text)  # a record's view: the text alone (its </think> is there)
    assert kept.answer == ANSWER and kept.thinking == DRAFT.strip()
    assert cut_after_line(text + CHATTER, VERDICT_LAST_LINE, opened) == text
    at = score_value_offset(text, opened)
    assert text[at] == "0" and text[at - 7:at] == "SCORE: " and at > len(DRAFT)
    first, last = text.index("SCORE: ") + 7, text.rindex("SCORE: ") + 7
    probs = [TokenProbs(first, {"1": 0.9, "0": 0.1}), TokenProbs(last, {"1": 0.2, "0": 0.8})]
    assert p_success(Output(text=text, opened_thinking=opened, token_probs=probs)) == pytest.approx(0.2)
    cut = ("" if opened else "<think>\n") + DRAFT  # the same output cut by the cap inside its thinking
    v = parse_verdict(cut, opened)
    assert v.status == "unparsed" and "ends inside its thinking" in v.parse_error
    assert score_value_offset(cut, opened) is None and cut_after_line(cut, VERDICT_LAST_LINE, opened) is None


# ---------------------------------------------------------------------------------------------- the real tokenizer
def test_the_tokenizer_is_qwen3s_and_the_model_has_its_vocabulary(qwen3_engine):
    tok = qwen3_engine.tokenizer
    assert len(tok) == 151_669 and qwen3_engine.model.config.text_config.vocab_size == 151_936
    assert tok.convert_tokens_to_ids(["0", "1", "<think>", "</think>"]) == [15, 16, 151667, 151668]
    assert tok.tokenize("SCORE: 1") == ["SCORE", ":", "Ġ", "1"]
    assert tok.decode([151667, 151668], skip_special_tokens=True) == "<think></think>"  # kept in decoded text
    assert not qwen3_engine.opens_thinking


def test_row_stop_follows_thinking_token_by_token(qwen3_engine):
    """RowStop over the real tokenizer's ids, fed one step at a time as generate feeds it."""
    from adaptrubric_local.engine.generation import RowStop

    tok = qwen3_engine.tokenizer
    texts = [("<think>\n" + DRAFT + "</think>\n\n" + ANSWER, False),  # a model that opens its own thinking
             (DRAFT + "</think>\n\n" + ANSWER, True),  # a Thinking checkpoint: the prompt opened it
             (ANSWER, False),  # an Instruct model
             ("<think>\n" + DRAFT, False)]  # cut inside its thinking: never stops at the draft
    rows = [tok.encode(t, add_special_tokens=False) for t, _ in texts]
    stop = RowStop(tok, qwen3_engine._newline_ids(), [VERDICT_LAST_LINE] * 4, [1000] * 4, prompt_len=1,
                   opened=[o for _, o in texts])
    width = max(map(len, rows))
    for j in range(1, width + 1):
        stop(torch.tensor([[0, *(r + [tok.pad_token_id] * width)[:j]] for r in rows]), None)
    for b in range(3):
        assert stop.ends[b] == len(rows[b]), (b, stop.ends)  # right after the answer's last line
    assert 3 not in stop.ends


@pytest.mark.parametrize("template", ["instruct", "thinking"])
def test_a_verdict_drafted_inside_thinking_neither_stops_generation_nor_decides(template, request, monkeypatch,
                                                                                 synth_set):
    """The first GPU user's case: a thinking output drafts SCORE 1 inside <think> and answers SCORE 0
    after </think>. Before, generation stopped at the draft's MISSING_EVIDENCE line and the verdict
    was 1; now it runs to the answer's and the verdict is 0, with P(SCORE=1) read at the answer."""
    engine = request.getfixturevalue("qwen3_engine" if template == "instruct" else "qwen3_thinking_engine")
    assert engine.opens_thinking == (template == "thinking")
    kept = ("<think>\n" if template == "instruct" else "") + DRAFT + "</think>\n\n" + ANSWER
    calls = force(monkeypatch, engine, [kept + CHATTER])
    monkeypatch.setattr(engine.config, "max_new_tokens", 400)
    tok = engine.tokenizer
    traj = load_trajectories(synth_set).trajectories[0]
    v = AdaptRubric(engine, PipelineConfig(router="rules", fine=False, verify_max_new_tokens=400)).score([traj])[0]
    draft_end = len(tok.encode(kept[:kept.index("MISSING_EVIDENCE: none\n") + 23], add_special_tokens=False))
    n_kept = len(tok.encode(kept, add_special_tokens=False))
    print(f"{template}: the draft's verdict line ends at token {draft_end}; the answer's at {n_kept}")
    assert calls[-1]["new_tokens"] == n_kept > draft_end
    assert (v.status, v.score, v.hit_cap) == ("ok", 0, False) and v.raw == kept
    assert v.p_success == pytest.approx(0.0, abs=1e-6)  # the forced answer digit "0" had probability 1


def test_a_thinking_output_cut_by_the_cap_has_no_verdict(qwen3_thinking_engine, monkeypatch, synth_set):
    tok = qwen3_thinking_engine.tokenizer
    draft_end = len(tok.encode(DRAFT, add_special_tokens=False))
    force(monkeypatch, qwen3_thinking_engine, [DRAFT + "</think>\n\n" + ANSWER])
    monkeypatch.setattr(qwen3_thinking_engine.config, "max_new_tokens", 400)
    traj = load_trajectories(synth_set).trajectories[0]
    pipe = AdaptRubric(qwen3_thinking_engine, PipelineConfig(router="rules", fine=False,
                                                             verify_max_new_tokens=draft_end - 3))
    v = pipe.score([traj])[0]
    assert v.status == "unparsed" and v.hit_cap and v.score is None and "ends inside its thinking" in v.parse_error
    assert v.completion_tokens == draft_end - 3


def test_the_remote_engine_reads_thinking_as_the_engine_does():
    """A server's reply, with a reasoning parser (reasoning apart) or without (the thinking in the
    content): the same verdict and the same answer as the in-process output."""
    from types import SimpleNamespace as NS

    from adaptrubric_local.engine.endpoint import Endpoint
    from adaptrubric_local.engine.openai_engine import OpenAIEngine

    def reply(content, reasoning=None, finish="stop"):
        msg = NS(content=content, reasoning_content=reasoning)
        return NS(choices=[NS(message=msg, finish_reason=finish, logprobs=None)], usage=None)

    eng = OpenAIEngine(endpoint=Endpoint("http://127.0.0.1:9/v1", "judge", max_retries=0, concurrency=1))
    replies = iter([reply(ANSWER, DRAFT), reply(DRAFT + "</think>\n\n" + ANSWER), reply(None, DRAFT, "length"),
                    reply("<think>\n" + DRAFT, None, "length")])
    eng.client = NS(chat=NS(completions=NS(create=lambda **kw: next(replies))), close=lambda: None)
    outs = eng.generate([Request(prompt="Judge.", kind="verify")] * 4)
    eng.close()
    verdicts = [parse_verdict(o.text, o.opened_thinking) for o in outs]
    assert [(v.status, v.score) for v in verdicts[:2]] == [("ok", 0), ("ok", 0)]
    kept = split(outs[1].text)
    assert (kept.answer, kept.thinking) == (ANSWER, DRAFT.strip()) and outs[0].reasoning == DRAFT
    for o, v in zip(outs[2:], verdicts[2:]):  # cut while thinking: no verdict, as in process
        assert o.hit_cap and v.status == "unparsed" and "ends inside its thinking" in v.parse_error
