"""What `--model` names, checked before transformers is asked: a local folder that must hold a saved
model (config.json, safetensors weights, the processor's files; a LoRA adapter or a folder of model
folders is named as such), a path that must exist, or a hub id (a bare name must be in the local
cache: hub ids look like Org/Name). Each problem is a one-line ValueError saying what was found and
what was expected, with the closest folder names. Knows nothing about loading, the hub's network or
generation (engine/loading.py).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

HUB_IDS = "hub ids look like Org/Name, e.g. Qwen/Qwen3-VL-8B-Instruct"
MODEL_FOLDER = ("a folder saved with save_pretrained (config.json, *.safetensors weights, and the processor's "
                "processor_config.json or preprocessor_config.json with its tokenizer files)")
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")


def check_model_path(model: str) -> bool:
    """Whether `model` is a local folder (True) or a hub id (False), after checking that it can be what it
    looks like: an existing folder must hold a saved model, a path must exist, and a bare name that is no
    folder here must be a hub id in the local cache. Otherwise a one-line ValueError says what was found
    and what was expected."""
    path = Path(model)
    if path.is_dir():
        _check_model_folder(path, model)
        return True
    if model.startswith((".", "/", "~")) or os.sep in model.strip("/").replace("/", "", 1):
        raise ValueError(f"model folder not found: {model}{_did_you_mean(path)}; give a local folder saved with "
                         "save_pretrained, or a hub id such as Qwen/Qwen3-VL-8B-Instruct")
    if "/" not in model and not _in_hub_cache(model):
        raise ValueError(f"--model {model}: no folder named {model} in {Path.cwd()}{_did_you_mean(path)}, and it is "
                         f"not a hub id: {HUB_IDS}")
    near = _did_you_mean(path) if path.parent.is_dir() else ""
    if near and not _in_hub_cache(model.strip("/").replace("/", "--")):  # models/tinyy beside models/tiny
        raise ValueError(f"model folder not found: {model}{near}; give a local folder saved with save_pretrained, "
                         f"or a hub id such as Qwen/Qwen3-VL-8B-Instruct (no hub id {model} in the local cache)")
    return False


def _check_model_folder(folder: Path, model: str) -> None:
    """A folder given as --model holds a saved model with its weights and processor, or a ValueError says
    what it holds instead."""
    names = {p.name for p in folder.iterdir()}
    if "config.json" not in names:
        if "adapter_config.json" in names:
            try:
                base = json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path")
            except (OSError, ValueError, AttributeError):
                base = None
            raise ValueError(f"--model {model}: this folder is a LoRA adapter (adapter_config.json), not a model: "
                             f"pass --adapter {model} --model {base or 'BASE'} (its base model)")
        inside = _model_folders_below(folder)
        found = f"it holds {_listing(folder)}" if names else "it is empty"
        raise ValueError(f"--model {model}: a folder, but not a saved model: no config.json ({found}); expected "
                         f"{MODEL_FOLDER}, or a hub id ({HUB_IDS})"
                         + (f"; the model folder(s) inside it: {', '.join(inside)}" if inside else ""))
    if not any(n.endswith(".safetensors") or n == "model.safetensors.index.json" for n in names):
        if any(n.endswith((".bin", ".bin.index.json")) for n in names):  # the conversion recipe
            raise ValueError(f"{folder}: only .bin weights found; this package loads safetensors only (a .bin file is "
                             "a pickle that can run code). Convert once, where you trust the file: python -c \"from "
                             "transformers import AutoModelForImageTextToText as M, AutoProcessor as P; "
                             f"M.from_pretrained('{folder}', use_safetensors=False).save_pretrained('{folder}-st'); "
                             f"P.from_pretrained('{folder}').save_pretrained('{folder}-st')\" and pass {folder}-st")
        raise ValueError(f"--model {model}: config.json but no weights (*.safetensors) in the folder "
                         f"({_listing(folder)}); expected {MODEL_FOLDER}")
    if not names & set(PROCESSOR_FILES):
        raise ValueError(f"--model {model}: the model's weights, but not its processor (no "
                         f"{' or '.join(PROCESSOR_FILES)}): save it beside them, AutoProcessor.from_pretrained(BASE)"
                         ".save_pretrained(folder), where BASE is the checkpoint it was trained from")


def _listing(folder: Path, k: int = 6) -> str:
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    return f"{len(entries)} entries: {', '.join(entries[:k])}" + (", ..." if len(entries) > k else "")


def _model_folders_below(folder: Path, depth: int = 2) -> list[str]:
    """Folders up to `depth` levels below `folder` that hold a config.json (the first few)."""
    found, level = [], [folder]
    for _ in range(depth):
        level = sorted(d for parent in level for d in parent.iterdir() if d.is_dir() and not d.name.startswith("."))
        found += [str(d) for d in level if (d / "config.json").is_file()]
        if len(found) >= 3 or len(level) > 200:
            break
    return found[:3]


def _did_you_mean(path: Path) -> str:
    import difflib

    parent = path.parent if str(path.parent) else Path(".")
    try:
        folders = [p.name for p in parent.iterdir() if p.is_dir()]
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, folders, n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(str(parent / c) if str(path.parent) != '.' else c for c in close)}?)" \
        if close else ""


def _in_hub_cache(name: str) -> bool:
    """Whether the local Hugging Face cache holds a repository of this (org-less) name."""
    from huggingface_hub import constants

    return (Path(constants.HF_HUB_CACHE) / f"models--{name}").is_dir()
