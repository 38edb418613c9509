"""One image policy from training to reward: an adapter records what its student was trained to see
(`image_policy.json`: visual-token budget, per-image pixel cap, screenshot budget), and every way of
scoring with `--adapter` (score, eval, ablate, tts, serve, RewardModel, distill evaluate, bank
refine) adopts it. A setting the caller gave explicitly wins, with a warning when it differs from
the adapter's. Knows nothing about models or pipelines beyond these three option names.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, Iterable, Optional

POLICY_FILE = "image_policy.json"
ENGINE_KEYS = ("max_visual_tokens", "max_pixels")
PIPELINE_KEYS = ("max_images",)


def write_policy(adapter: str | Path, policy: dict) -> None:
    """Record the image settings a student was trained with in its adapter folder."""
    unknown = set(policy) - set(ENGINE_KEYS + PIPELINE_KEYS)
    if unknown:
        raise ValueError(f"unknown image policy key(s): {sorted(unknown)}")
    (Path(adapter) / POLICY_FILE).write_text(json.dumps(policy, indent=2) + "\n")


def read_policy(adapter: Optional[str | Path]) -> dict:
    """The adapter's image settings ({} for no adapter, or one trained before they were recorded)."""
    if not adapter:
        return {}
    path = Path(adapter) / POLICY_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}, column {exc.colno})") from None
    return {k: data[k] for k in ENGINE_KEYS + PIPELINE_KEYS if k in data}


def _warn(msg: str) -> None:
    print(f"warning: {msg}", file=sys.stderr)


def adopt(adapter: Optional[str | Path], engine: dict, pipeline: dict, explicit: Iterable[str] = (),
          warn: Callable[[str], None] = _warn) -> tuple[dict, dict]:
    """(engine options, pipeline options) with the adapter's image settings filled in where the
    caller did not set them explicitly; an explicit value that differs is kept, with a warning."""
    policy = read_policy(adapter)
    if not policy:
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
    return engine, pipeline
