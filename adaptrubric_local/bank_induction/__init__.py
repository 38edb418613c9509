"""Growing a rubric bank for your own apps (paper §4.1, Appendix B): `induce` asks a teacher model
for the dimensions that separate successful from failed trajectories, grouped into task families,
and writes a bank in the strict schema; `refine` revises each family's rubric from the cases where
the verdict disagrees with the label, keeping a revision only when it raises validation accuracy.
The teacher is any Engine; the prompts are data (`prompts/induction.yaml`, schema in `prompts.py`).
"""
from .induce import InduceConfig, induce
from .prompts import InductionPrompts, load_induction_prompts
from .refine import RefineConfig, refine

__all__ = ["InduceConfig", "InductionPrompts", "RefineConfig", "induce", "load_induction_prompts", "refine"]
