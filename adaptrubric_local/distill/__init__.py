"""Distillation of a large judge's AdaptRubric judgments into a small local verifier: collecting the
teacher's outputs (`collect`, files in `records`), the training examples and collator (`examples`),
the run's settings (`config`), its memory plan (`plan`), the Trainer with the distillation loss
(`trainer`), the training run itself (`train`), the adapter's model card (`card`), and evaluating and
merging the student (`evaluate`).
"""
