"""The distillation loss (distill/trainer.py): the language-model head runs only at labelled positions,
the chunked cross-entropy equals the plain one (values and gradients), the SCORE digit learns the
teacher's probability when there is one, and the validation metrics are computed by hand."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from adaptrubric_local.distill.examples import Collator, Example
from adaptrubric_local.distill.trainer import DistillTrainer, LossConfig, agreement_metrics, chunked_cross_entropy

from conftest import make_png


def _trainer(engine, **loss):
    """The trainer's loss without a Trainer around it."""
    t = DistillTrainer.__new__(DistillTrainer)
    tok = engine.tokenizer
    t.loss_cfg = LossConfig(**{"soft_labels": True, "kd_weight": 1.0, "score_token_weight": 1.0, **loss})
    t.digit_ids = (tok.convert_tokens_to_ids("0"), tok.convert_tokens_to_ids("1"))
    t.image_config = engine.images.cfg
    return t


def _batch(engine, tmp_path, teacher_p=None):
    imgs = [make_png(tmp_path / f"{k}.png", k) for k in range(2)]
    target = "SCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"
    exs = [Example("a", "verify", "Judge it.", imgs, "", target, teacher_score=1, teacher_p=teacher_p),
           Example("b", "verify", "Judge this one, please.", imgs[:1], "", target.replace("1", "0", 1),
                   teacher_score=0, teacher_p=None if teacher_p is None else 1 - teacher_p)]
    return Collator(engine.encoder, engine.images.cfg)(exs)


def test_the_head_runs_only_where_there_are_labels(tiny_engine, tmp_path, monkeypatch):
    batch = _batch(tiny_engine, tmp_path)
    seen = {}
    real = tiny_engine.model.forward

    def spy(*a, **kw):
        seen["keep"] = kw["logits_to_keep"]
        out = real(*a, **kw)
        seen["shape"] = tuple(out.logits.shape)
        return out

    monkeypatch.setattr(tiny_engine.model, "forward", spy)
    _trainer(tiny_engine)._forward(tiny_engine.model, dict(batch))
    labelled = batch["labels"][:, 1:] != -100  # positions whose next token is labelled
    union = labelled.any(0).nonzero().flatten()
    vocab = tiny_engine.model.config.text_config.vocab_size
    # 1-D positions (what every transformers 5.x takes): those labelled in any row
    assert seen["keep"].dim() == 1 and torch.equal(seen["keep"].cpu(), union)
    assert seen["shape"] == (batch["labels"].shape[0], union.numel(), vocab)
    assert seen["shape"][0] * union.numel() < batch["input_ids"].numel() / 2  # most positions get no logits


def test_hard_labels_give_the_models_own_loss(tiny_engine, tmp_path):
    batch = _batch(tiny_engine, tmp_path)
    ours = _trainer(tiny_engine)._forward(tiny_engine.model, dict(batch))["loss"]
    inputs = {k: v for k, v in batch.items() if k not in ("labels", "score_pos", "weight", "teacher_score",
                                                           "teacher_p")}
    inputs = _trainer(tiny_engine)._pixels(tiny_engine.model, inputs)
    ref = tiny_engine.model(**inputs, labels=batch["labels"]).loss  # logits everywhere, transformers' loss
    assert float(ours) == pytest.approx(float(ref), rel=1e-5)


def test_soft_label_at_the_digit_and_the_kl_term(tiny_engine, tmp_path):
    batch = _batch(tiny_engine, tmp_path, teacher_p=0.8)
    hard = _trainer(tiny_engine, soft_labels=False)._forward(tiny_engine.model, dict(batch))
    soft = _trainer(tiny_engine)._forward(tiny_engine.model, dict(batch))
    no_kd = _trainer(tiny_engine, kd_weight=0.0)._forward(tiny_engine.model, dict(batch))
    p1 = soft["p1"]
    # KL(teacher || student) over the two digits, by hand, from the student's two-way probabilities
    kl = [0.8 * math.log(0.8 / float(p1[0])) + 0.2 * math.log(0.2 / (1 - float(p1[0]))),
          0.2 * math.log(0.2 / float(p1[1])) + 0.8 * math.log(0.8 / (1 - float(p1[1])))]
    assert float(soft["loss"] - no_kd["loss"]) == pytest.approx(sum(kl) / 2, rel=1e-4)
    assert float(no_kd["loss"]) != pytest.approx(float(hard["loss"]))  # the digit's target is the distribution
    assert torch.equal(hard["p1"], soft["p1"])  # the same forward pass reads the same probabilities


def test_the_score_digit_weight(tiny_engine, tmp_path):
    batch = _batch(tiny_engine, tmp_path)
    one = _trainer(tiny_engine)._forward(tiny_engine.model, dict(batch))
    four = _trainer(tiny_engine, score_token_weight=4.0)._forward(tiny_engine.model, dict(batch))
    assert float(four["loss"]) != pytest.approx(float(one["loss"]))
    assert torch.equal(one["nll"], four["nll"])  # the per-row response loss reported is unweighted


def test_chunked_cross_entropy_equals_the_plain_one():
    torch.manual_seed(0)
    logits = torch.randn(700, 50, requires_grad=True)
    targets = torch.randint(0, 50, (700,))
    ours = chunked_cross_entropy(logits, targets, chunk=128)
    ref = F.cross_entropy(logits, targets, reduction="none")
    assert torch.allclose(ours, ref, atol=1e-6)
    g_ours, = torch.autograd.grad(ours.sum(), logits)
    g_ref, = torch.autograd.grad(ref.sum(), logits)
    assert torch.allclose(g_ours, g_ref, atol=1e-6)


def test_agreement_metrics_by_hand():
    # four examples: P(SCORE=1) and response loss; teacher SCORE and P (NaN: none)
    pred = np.array([[0.9, 1.0], [0.3, 2.0], [0.6, 3.0], [np.nan, 4.0]])
    truth = np.array([[1, 0.8], [1, np.nan], [0, 0.3], [-1, np.nan]])
    m = agreement_metrics(SimpleNamespace(predictions=pred, label_ids=truth))
    assert m["agreement"] == pytest.approx(1 / 3) and m["n_verdicts"] == 3
    assert m["p_mae"] == pytest.approx((0.1 + 0.3) / 2)
    assert m["response_loss"] == pytest.approx(2.5)
    assert m["selection"] == pytest.approx(1 / 3 - 2.5 / (50 * 5))
    worse_loss = agreement_metrics(SimpleNamespace(predictions=pred + np.array([0, 40]), label_ids=truth))
    assert m["selection"] > worse_loss["selection"] > m["agreement"] - 1 / 3  # the loss only breaks ties
