"""Distillation of a large judge's AdaptRubric judgments into a small local verifier: collecting the
teacher's outputs (`collect`), reading them back as training examples (`records`), evaluating and
merging the student (`evaluate`). The training loop itself lives in the top-level `training`
package (transformers' Trainer + peft).
"""


def import_training():
    """The top-level `training` package's `train_lora` module, also from a source checkout where
    `training/` sits beside the installed package rather than inside the installed distribution."""
    import sys
    from pathlib import Path

    try:
        import training.train_lora as tl
    except ImportError:
        root = Path(__file__).resolve().parents[2]
        if not (root / "training" / "__init__.py").is_file():
            raise
        sys.path.insert(0, str(root))
        import training.train_lora as tl
    return tl
