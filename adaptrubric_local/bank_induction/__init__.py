"""Growing a rubric bank for your own apps (paper §4.1, Appendix B): `induce` asks a teacher model
for the verification dimensions that separate successful from failed trajectories and a grouping of
them into task families, and writes a bank in the strict schema; `refine` revises each family's
rubric from the cases where the verifier's verdict disagrees with the label, keeping a revision only
when it raises accuracy on a validation split the teacher never saw.

The teacher is any Engine (a local model, an OpenAI-compatible endpoint, a scripted FakeEngine).
Prompts are data (`adaptrubric_local/prompts/induction.yaml`, schema in `prompts.py`).
"""
from .induce import InduceConfig, induce
from .prompts import InductionPrompts, load_induction_prompts
from .refine import RefineConfig, refine

__all__ = ["InduceConfig", "InductionPrompts", "RefineConfig", "induce", "load_induction_prompts", "refine"]
