"""transformers' Trainer with a distillation loss whose memory does not grow with the vocabulary.

The language-model head runs only at the positions whose next token is labelled (the response:
tens of tokens for `verdict`, hundreds for `full`), never at the thousands of prompt and image
positions (`logits_to_keep` with a boolean mask), and the cross-entropy is taken in chunks under
activation checkpointing, so only one chunk's float32 log-softmax is alive at a time. Peak memory
is then weights + checkpointed activations + (labelled tokens x vocabulary), not (sequence x
vocabulary).

The loss: token cross-entropy over the response (each row weighted, e.g. to balance classes), where
the SCORE digit weighs `score_token_weight`; for an example whose teacher gave P(SCORE=1) (with soft
labels on), the digit's target is that distribution instead of the hard digit, and a KL term to
the teacher's two-way distribution (P("0"), P("1")) is added, weighted `kd_weight`. Evaluation
reads the student's two-way P(SCORE=1) at the digit from the same forward pass (no generation):
agreement with the teacher's SCORE and the mean absolute difference from its probability, which
choose the best epoch. Knows nothing about files, prompts or argument parsing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformers import Trainer
from transformers.trainer_pt_utils import LengthGroupedSampler

from ..engine.images import normalise

CE_CHUNK = 256  # labelled positions per cross-entropy chunk
SELECTION_LOSS_CAP = 50.0  # the tie-breaking loss term stays below one example's worth of agreement


@dataclass
class LossConfig:
    """How the response tokens are weighted (see the module docstring)."""

    soft_labels: bool = True
    kd_weight: float = 1.0
    score_token_weight: float = 1.0


def _ce(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), targets, reduction="none")


def labelled_logits(model, inputs: dict, keep: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Logits at the kept positions only, (N, V) in row-major order: the head runs at the positions kept in
    any row (a 1-D `logits_to_keep`, which every transformers 5.x takes; a 2-D boolean one is 5.2x's
    only), then each row's own are picked (with one example a step, the same positions)."""
    union = keep.any(0).nonzero().flatten()
    out = model(**inputs, logits_to_keep=union, use_cache=False).logits  # (B, n, V)
    where = torch.full((keep.shape[1],), -1, dtype=torch.long, device=keep.device)
    where[union] = torch.arange(union.numel(), device=keep.device)
    return out[rows, where[cols]]


def chunked_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, chunk: int = CE_CHUNK) -> torch.Tensor:
    """Per-position cross-entropy, upcast to float32 one chunk at a time (recomputed in backward)."""
    parts = []
    for i in range(0, logits.shape[0], chunk):
        x, t = logits[i:i + chunk], targets[i:i + chunk]
        parts.append(checkpoint(_ce, x, t, use_reentrant=False) if x.requires_grad else _ce(x, t))
    return torch.cat(parts) if parts else logits.new_zeros(0)


class DistillTrainer(Trainer):
    """Trainer whose loss is computed here (see the module docstring)."""

    _pixel_dtype: torch.dtype | None = None  # the vision tower's, read on the first batch

    def __init__(self, *args, loss: LossConfig, digit_ids: tuple[int, int], image_config, lengths=None,
                 group_by_length: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_cfg, self.digit_ids, self.image_config = loss, digit_ids, image_config
        self.lengths, self.group_by_length = lengths, group_by_length
        self.loss_is_scaled_for_ga = False  # a per-micro-batch mean: the Trainer divides by the accumulation steps

    # ------------------------------------------------------------------ data
    def _get_train_sampler(self, train_dataset=None):
        if self.group_by_length and self.lengths:
            return LengthGroupedSampler(self.args.train_batch_size * self.args.gradient_accumulation_steps,
                                        lengths=self.lengths)
        return super()._get_train_sampler(train_dataset)

    def _pixels(self, model, inputs: dict) -> dict:
        if "pixel_patches" in inputs:
            if self._pixel_dtype is None:  # once: the vision tower's dtype does not change
                self._pixel_dtype = next((p.dtype for n, p in model.named_parameters() if ".visual." in f".{n}"
                                          and p.is_floating_point()), torch.float32)
            inputs["pixel_values"] = normalise(inputs.pop("pixel_patches"), self.image_config).to(self._pixel_dtype)
        return inputs

    # ------------------------------------------------------------------ loss
    def _forward(self, model, inputs: dict) -> dict:
        """The loss and, per row, the student's two-way P(SCORE=1) at the digit (NaN where none)."""
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        pos, weight = inputs.pop("score_pos"), inputs.pop("weight")
        t_score, t_p = inputs.pop("teacher_score"), inputs.pop("teacher_p")
        inputs = self._pixels(model, inputs)
        keep = torch.zeros_like(labels, dtype=torch.bool)
        keep[:, :-1] = labels[:, 1:] != -100  # positions whose next token is labelled
        rows, cols = keep.nonzero(as_tuple=True)
        logits = labelled_logits(model, inputs, keep, rows, cols)  # (N, V), row-major
        targets = labels[rows, cols + 1]
        token_w = weight[rows].float()
        at_digit = pos[rows] == cols + 1
        soft = torch.isfinite(t_p) & (pos >= 0) if self.loss_cfg.soft_labels else torch.zeros_like(pos, dtype=bool)
        ce = chunked_cross_entropy(logits, targets)
        token_w = torch.where(at_digit, token_w * self.loss_cfg.score_token_weight, token_w)
        d_rows = rows[at_digit]
        # log (P("0"), P("1")) renormalised over the two digits, (n_digits, 2)
        log2 = torch.log_softmax(logits[at_digit][:, list(self.digit_ids)].float(), dim=-1)
        if soft.any():
            p = t_p[d_rows].float().clamp(0.0, 1.0)
            teacher = torch.stack([1 - p, p], dim=-1)
            logq = torch.log_softmax(logits[at_digit].float(), dim=-1)[:, list(self.digit_ids)]
            soft_ce = -(teacher * logq).sum(-1)  # cross-entropy to the teacher's distribution over the vocabulary
            digit_ce = torch.where(soft[d_rows], soft_ce, ce[at_digit])
            ce = ce.masked_scatter(at_digit, digit_ce)
        loss = (ce * token_w).sum() / token_w.sum().clamp(min=1e-8)
        kd = self._kd(log2, t_p[d_rows], soft[d_rows], weight[d_rows])
        if kd is not None:
            loss = loss + self.loss_cfg.kd_weight * kd
        p1 = torch.full((labels.shape[0],), float("nan"), device=labels.device)
        p1[d_rows] = log2[:, 1].detach().exp().to(p1.dtype)
        n = torch.zeros(labels.shape[0], device=labels.device).index_add_(0, rows, torch.ones_like(ce))
        nll = torch.zeros(labels.shape[0], device=labels.device).index_add_(0, rows, ce.detach().float())
        return {"loss": loss, "p1": p1, "nll": nll / n.clamp(min=1), "teacher_score": t_score, "teacher_p": t_p}

    @staticmethod
    def _kd(log2: torch.Tensor, t_p: torch.Tensor, soft: torch.Tensor, w: torch.Tensor) -> torch.Tensor | None:
        """Mean KL(teacher || student) over the two digits, for the rows with a soft label."""
        if not soft.any():
            return None
        p = t_p[soft].float().clamp(1e-6, 1 - 1e-6)
        teacher = torch.stack([1 - p, p], dim=-1)
        kl = (teacher * (teacher.log() - log2[soft])).sum(-1)
        return (kl * w[soft]).sum() / w[soft].sum().clamp(min=1e-8)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = self._forward(model, inputs)
        return (out["loss"], out) if return_outputs else out["loss"]

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            out = self._forward(model, inputs)
        if prediction_loss_only:
            return out["loss"].detach(), None, None
        truth = torch.stack([out["teacher_score"].float(), out["teacher_p"].float()], dim=-1)
        return out["loss"].detach(), torch.stack([out["p1"].float(), out["nll"].float()], dim=-1), truth


def agreement_metrics(eval_pred) -> dict:
    """From (student P(SCORE=1), response loss) and (teacher SCORE, teacher P) per example: agreement
    with the teacher's SCORE; where the teacher gave a probability, the mean absolute difference from
    it; and `selection`, what the best epoch is chosen by: agreement, ties broken by the response
    loss (worth less than one example of agreement), since an epoch that agrees as often but has not
    yet learned the answer's format would generate unparseable verdicts."""
    pred = np.asarray(eval_pred.predictions, dtype=float).reshape(-1, 2)
    p1, nll = pred[:, 0], pred[:, 1]
    truth = np.asarray(eval_pred.label_ids, dtype=float).reshape(-1, 2)
    ok = np.isfinite(p1) & (truth[:, 0] >= 0)
    agree = float(((p1[ok] > 0.5) == (truth[ok, 0] == 1)).mean()) if ok.any() else 0.0
    loss = float(np.nanmean(nll)) if np.isfinite(nll).any() else 0.0
    out = {"agreement": agree, "n_verdicts": int(ok.sum()), "response_loss": loss,
           "selection": agree - min(loss, SELECTION_LOSS_CAP) / (SELECTION_LOSS_CAP * (len(p1) + 1))}
    soft = ok & np.isfinite(truth[:, 1])
    if soft.any():
        out["p_mae"] = float(np.abs(p1[soft] - truth[soft, 1]).mean())
    return out
