"""Subcommands that run models or make data: registered into the main parser by `cli.py`."""
from __future__ import annotations


def add_subcommands(sub, add_model_args, examples: str) -> None:
    """Register the scoring-related subcommands."""
