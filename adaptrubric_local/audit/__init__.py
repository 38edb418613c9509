"""Auditing a verifier before trusting it as a reward: counterfactual copies of a labelled data set
(`perturbations`), scored with the run's pipeline and engine (`run`), and how often each change moved
the verdict, and which way (`report`, `review`). `adaptrubric audit` is the command (cli/audit.py).

Importing this package loads the perturbations only (no model code, no plotting).
"""
from .perturbations import REGISTRY, DataSet, Perturbation, build, build_all, get, perturbation

__all__ = ["REGISTRY", "DataSet", "Perturbation", "build", "build_all", "get", "perturbation"]
