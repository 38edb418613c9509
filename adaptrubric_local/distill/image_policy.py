"""One image policy from training to reward: an adapter records what its student was trained to see
(`image_policy.json`: visual-token budget, per-image pixel cap, screenshot budget) and the base it
was trained on (`base_quantisation.json`: 4-bit or 8-bit bitsandbytes, or neither; for adapters
trained before it was written, `training_config.json`'s `load_in_4bit`), and every way of scoring
with `--adapter` (score, eval, ablate, tts, serve, RewardModel, distill evaluate, bank refine)
adopts them: a QLoRA student is scored on the 4-bit base it learned on. A setting the caller gave
explicitly wins, with a warning when it differs from the adapter's. Knows nothing about models or
pipelines beyond these option names.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

POLICY_FILE = "image_policy.json"
QUANT_FILE = "base_quantisation.json"
ENGINE_KEYS = ("max_visual_tokens", "max_pixels")
PIPELINE_KEYS = ("max_images",)
QUANT_KEYS = ("load_in_4bit", "load_in_8bit")  # engine options, adopted together


def write_policy(adapter: str | Path, policy: dict) -> None:
    """Record the image settings a student was trained with in its adapter folder."""
    unknown = set(policy) - set(ENGINE_KEYS + PIPELINE_KEYS)
    if unknown:
        raise ValueError(f"unknown image policy key(s): {sorted(unknown)}")
    (Path(adapter) / POLICY_FILE).write_text(json.dumps(policy, indent=2) + "\n")


def _read(adapter: str | Path | None, name: str) -> dict | None:
    """The adapter folder's JSON file `name`, or None when there is no adapter or no such file."""
    path = Path(adapter) / name if adapter else None
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}, column {exc.colno})") from None


def read_policy(adapter: str | Path | None) -> dict:
    """The adapter's image settings ({} for no adapter, or one trained before they were recorded)."""
    data = _read(adapter, POLICY_FILE) or {}
    return {k: data[k] for k in ENGINE_KEYS + PIPELINE_KEYS if k in data}


def write_quantisation(adapter: str | Path, load_in_4bit: bool, load_in_8bit: bool = False, **details) -> None:
    """Record how the base was quantised while the adapter was trained (`details`: what loading used,
    for the reader: quant type, double quantisation, compute dtype, modules left unquantised)."""
    record = {"load_in_4bit": bool(load_in_4bit), "load_in_8bit": bool(load_in_8bit), **details}
    (Path(adapter) / QUANT_FILE).write_text(json.dumps(record, indent=2) + "\n")


def read_quantisation(adapter: str | Path | None) -> dict:
    """{load_in_4bit, load_in_8bit} of the base the adapter was trained on; {} when unknown (no
    adapter, or one from elsewhere)."""
    for name in (QUANT_FILE, "training_config.json"):  # the second: adapters trained before the first existed
        data = _read(adapter, name) or {}
        if any(k in data for k in QUANT_KEYS):
            return {k: bool(data.get(k, False)) for k in QUANT_KEYS}
    return {}


def adopt(adapter: str | Path | None, engine: dict, pipeline: dict, explicit: Iterable[str] = (),
          warn: Callable[[str], None] = lambda msg: print(f"warning: {msg}", file=sys.stderr)) -> tuple[dict, dict]:
    """(engine options, pipeline options) with the adapter's image settings filled in where the
    caller did not set them explicitly; an explicit value that differs is kept, with a warning."""
    policy, quant = read_policy(adapter), read_quantisation(adapter)
    if not policy and not quant:
        return engine, pipeline
    engine, pipeline, explicit = dict(engine), dict(pipeline), set(explicit)
    for key, value in policy.items():
        dest = engine if key in ENGINE_KEYS else pipeline
        if key not in explicit:
            if value is not None or key in ENGINE_KEYS:  # None for an engine key is a setting: native size
                dest[key] = value
            continue
        if dest.get(key) != value:
            warn(f"{key}={dest.get(key)} differs from the {value} adapter {adapter} was trained with; the student "
                 f"will see other images than it learned on (drop the option to use the adapter's)")
    if quant and not explicit & set(QUANT_KEYS):
        engine.update(quant)
    elif quant:  # the caller chose the base's loading: keep it, and say if it is not what the student learned on
        for key, value in quant.items():
            if bool(engine.get(key, False)) != value:
                warn(f"{key}={bool(engine.get(key, False))} differs from the {value} adapter {adapter} was trained "
                     f"with; the student will run on other base weights than it learned on (drop the option to load "
                     f"the base as it was trained)")
    return engine, pipeline
