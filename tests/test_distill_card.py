"""The adapter's model card (distill/card.py): what the student is, what it learned from, what it sees,
the epoch kept, and the command that scores with it."""
import json

from adaptrubric_local.distill.card import write_model_card
from adaptrubric_local.distill.config import TrainConfig


def test_the_card_says_what_a_user_needs(dist, tmp_path):
    cfg = TrainConfig(data=str(dist), model="Qwen/Qwen3-VL-4B-Instruct", out=str(tmp_path), max_visual_tokens=6144,
                      target="verdict")
    summary = {"train_examples": 6, "val_examples": 2, "best_epoch": 2.0, "best_metric": 0.99,
               "best_metric_name": "selection", "soft_label_examples": 0, "seconds": 12.0, "optimizer_steps": 3}
    write_model_card(tmp_path, cfg, summary, evaluation={"agreement_with_teacher": {"base": 0.5, "adapter": 1.0}})
    card = (tmp_path / "README.md").read_text()
    manifest = json.loads((dist / "manifest.json").read_text())
    for needle in ("base_model: Qwen/Qwen3-VL-4B-Instruct", "the teacher `labels`", manifest["bank_sha"],
                   "visual tokens: 6144 per trajectory", "kept epoch | 2", "verdict lines only",
                   "| agreement_with_teacher | 0.5 | 1 |",
                   "adaptrubric score DATA --model Qwen/Qwen3-VL-4B-Instruct --adapter", "--router rules --no-fine"):
        assert needle in card, needle
