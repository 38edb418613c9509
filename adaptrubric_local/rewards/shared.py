"""One RewardModel per process, for the RL adapters: configured by the trainer (`configure`) or built once
on first use from $ADAPTRUBRIC_CONFIG (a YAML/JSON file of options) and $ADAPTRUBRIC_SERVICE_URL; and
one per model-server address a framework hands over (`for_router`: verl's reward router), which runs
the method against that server and loads no model here. It lives in its own package module, not in
rewards/, because verl and OpenRLHF load rewards/ by path (a second copy of that file must still
find the same models). Knows nothing about RL frameworks.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path
from typing import Any

from ..pipeline import PipelineConfig
from .config import load_options
from .model import RewardModel

_SHARED: dict[str, Any] = {"rm": None}
_SHARED_LOCK = threading.Lock()
_ROUTED: dict[str, RewardModel] = {}
CONFIG_ENV = "ADAPTRUBRIC_CONFIG"
URL_ENV = "ADAPTRUBRIC_SERVICE_URL"


def configure(config: str | Path | PipelineConfig | None = None, **options) -> RewardModel:
    """Set the process-wide RewardModel from a config file and/or options (replacing any earlier one).
    A PipelineConfig may stand in for the file: its fields become options."""
    if isinstance(config, PipelineConfig):
        options = {**dataclasses.asdict(config), **options}
        config = None
    rm = RewardModel.from_config(config, **options) if config else RewardModel.from_options(options)
    with _SHARED_LOCK:
        old, _SHARED["rm"] = _SHARED["rm"], rm
    if old is not None:
        old.close()
    return rm


def shared() -> RewardModel:
    """The process-wide RewardModel: the configured one, else built once from $ADAPTRUBRIC_CONFIG
    (a YAML/JSON file) and $ADAPTRUBRIC_SERVICE_URL, else the defaults."""
    rm = _SHARED["rm"]
    if rm is None:
        with _SHARED_LOCK:
            if _SHARED["rm"] is None:
                path = os.environ.get(CONFIG_ENV)
                extra = {"service_url": os.environ[URL_ENV]} if os.environ.get(URL_ENV) else {}
                _SHARED["rm"] = RewardModel.from_config(path, **extra) if path else RewardModel.from_options(extra)
            rm = _SHARED["rm"]
    return rm


def for_router(address: str, served_name: str | None = None) -> RewardModel:
    """The process-wide RewardModel for the OpenAI-compatible server at `address` ("host:port", or a
    URL), built once per address: the options of $ADAPTRUBRIC_CONFIG (when set) with `openai_url`
    pointing at `http://host:port/v1` and `model` the served name (`served_name`, else the file's
    `model`, else the server's only model). A `service_url` of the file is left out: the server given
    here does the verifying."""
    url = address.rstrip("/") if "://" in address else f"http://{address}"
    url = url if url.endswith("/v1") else url + "/v1"
    rm = _ROUTED.get(url)
    if rm is None:
        with _SHARED_LOCK:
            rm = _ROUTED.get(url)
            if rm is None:
                path = os.environ.get(CONFIG_ENV)
                opts = load_options(path) if path else {}
                opts.pop("service_url", None)
                opts["openai_url"] = url
                if served_name:
                    opts["model"] = served_name
                rm = _ROUTED[url] = RewardModel.from_options(opts, where=path or "options")
    return rm
