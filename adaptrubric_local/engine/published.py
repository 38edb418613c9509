"""A model's config and processor without its weights, for plans made before any download: a folder's
files, the local Hugging Face cache's, or, for a published Qwen3-VL checkpoint (ARCHITECTURES) that
was never downloaded, the package's copy of its published values: the config of architectures.py and
the processor of tiny.qwen3_processor (on the real Qwen3 tokenizer, with an Instruct or a Thinking
checkpoint's chat template). Each comes with a line saying where it came from. Never touches the
network for a published id. Knows nothing about training or plans.
"""
from __future__ import annotations

from pathlib import Path

from .architectures import ARCHITECTURES, qwen3vl_config

PUBLISHED = ("published config values of {model} (adaptrubric_local/engine/architectures.py) and Qwen3-VL's "
             "processor settings on the Qwen3 tokenizer (engine/tiny.py): no file of the checkpoint needed")


def config_and_processor(model: str) -> tuple[object, object, str]:
    """(processor, model config, where they came from) for `model`: a folder or a hub id."""
    from transformers import AutoConfig, AutoProcessor

    from .loading import from_pretrained_local_first, hub_offline

    local = Path(model).is_dir()
    if not local and model in ARCHITECTURES:
        try:  # the local cache alone (the hub client switched offline), else the package's copy
            with hub_offline():
                return (AutoProcessor.from_pretrained(model, local_files_only=True),
                        AutoConfig.from_pretrained(model, local_files_only=True),
                        f"the checkpoint's own files in the local Hugging Face cache ({model})")
        except (OSError, ValueError):
            return published(model)
    processor = from_pretrained_local_first(AutoProcessor.from_pretrained, model, local, "processor")
    config = from_pretrained_local_first(AutoConfig.from_pretrained, model, local, "config")
    return processor, config, (f"the files of {model}" if local else f"the checkpoint's files ({model})")


def published(model: str) -> tuple[object, object, str]:
    """The package's copy of a published checkpoint's processor and config, and the line saying so."""
    from .tiny import qwen3_processor

    return (qwen3_processor(thinking=model.endswith("-Thinking")), qwen3vl_config(ARCHITECTURES[model]),
            PUBLISHED.format(model=model))
