"""LoRA / QLoRA distillation of a teacher's AdaptRubric judgments into a small Qwen3-VL verifier.

`train_lora.train(TrainConfig(...))` (or `python -m training.train_lora DIR --model M --out OUT`,
also under `accelerate launch` / `torchrun`) trains an adapter on a folder written by
`adaptrubric distill collect`; `examples` turns that folder into model inputs built exactly as the
scoring engine builds them.
"""
