"""Building an engine from options: the one place outside the engine package that knows how. The
options are HFEngineConfig's fields (their flags come from flags.py, like every config's). Importing
this module does not import torch or transformers: that happens in `build_engine`. Knows nothing
about rubrics, pipelines or files of trajectories.
"""
from __future__ import annotations

from typing import Optional


def build_engine(model: Optional[str] = None, **options):
    """The transformers engine for `model` with HFEngineConfig `options` (imports torch)."""
    from .hf import HFEngine, HFEngineConfig

    if not model:
        raise ValueError("no model given: pass --model (a hub id such as Qwen/Qwen3-VL-4B-Instruct, or a local "
                         "folder)")
    return HFEngine(HFEngineConfig(model=model, **options))
