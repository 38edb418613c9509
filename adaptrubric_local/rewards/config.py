"""The settings of a reward model: how verdicts become rewards and where trajectories and the verifier
live (`RewardConfig`), and one flat option mapping (a reward.yaml, `serve` flags, RewardModel
keywords) split into the reward, pipeline and engine configs, with an unknown key an error naming
it. Imports no model code. Knows nothing about scoring or HTTP.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.hf_config import HFEngineConfig
from ..engine.options import ENGINE_OPTIONS
from ..engine.remote import REMOTE_FIELDS
from ..pipeline import PipelineConfig
from .images import DEFAULT_MAX_PIXELS

REWARD_MODES = ("binary", "p_success")


@dataclass
class RewardConfig:
    """How rewards are made from verdicts and where trajectories and the verifier live."""

    reward: str = field(default="binary", metadata={"common": "rewards",
        "help": "binary (SCORE 0/1) or p_success (P(SCORE=1) read from the logits; 'soft' is accepted)"})
    unparsed_reward: float = field(default=0.0, metadata={
        "help": "the number given to frameworks that need one for an unparsed or failed verdict (TRL gets None)"})
    data_root: str | None = field(default=None, metadata={
        "help": "folder that relative screenshot paths resolve against", "none": "the current directory"})
    image_roots: list[str] = field(default_factory=list, metadata={
        "help": "further folders tried, in order, for relative screenshot paths"})
    service_url: str | None = field(default=None, metadata={
        "help": "URL(s) of `adaptrubric serve`, comma-separated; when set no model is loaded in this process"})
    service_timeout: float = field(default=600.0, metadata={"help": "seconds to wait for the service per request"})
    inline_images: bool = field(default=False, metadata={
        "help": "send screenshots to the service inside the request (data URLs) instead of as paths: for a "
                "service on another machine, without a shared file system"})
    api_key_env: str = field(default="ADAPTRUBRIC_API_KEY", metadata={
        "help": "environment variable holding the service's API key: clients send it as a bearer token, the "
                "service checks it (never put the key itself in a config file)"})
    max_image_pixels: int = field(default=DEFAULT_MAX_PIXELS, metadata={
        "help": "largest inline screenshot accepted, in pixels (giant images and decompression bombs are "
                "refused from the header)"})
    batch_window_ms: float = field(default=50.0, metadata={
        "help": "how long the scoring thread waits for more concurrent calls before running a batch"})
    max_batch_trajectories: int = field(default=32, metadata={
        "help": "most trajectories the scoring thread gathers from concurrent calls into one batch"})
    max_pending: int | None = field(default=None, metadata={
        "help": "most trajectories waiting to be scored; more are refused (the service answers 503)",
        "none": "no limit"})
    calibration: str | None = field(default=None, metadata={"common": "rewards",
        "help": "a file from `adaptrubric calibrate`: verdicts get p_success_calibrated, which the p_success "
                "reward then uses"})

    def __post_init__(self):
        if self.reward == "soft":
            self.reward = "p_success"
        if self.reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {', '.join(REWARD_MODES)}, got {self.reward!r}")
        if isinstance(self.image_roots, str):
            self.image_roots = [self.image_roots]
        self.unparsed_reward = float(self.unparsed_reward)
        if self.max_batch_trajectories < 1 or self.batch_window_ms < 0 or self.service_timeout <= 0:
            raise ValueError("max_batch_trajectories must be >= 1, batch_window_ms >= 0 and service_timeout > 0")
        if self.max_pending is not None and self.max_pending < 1:
            raise ValueError(f"max_pending must be >= 1 or None, got {self.max_pending}")
        if self.max_image_pixels < 1:
            raise ValueError(f"max_image_pixels must be >= 1, got {self.max_image_pixels}")

    @property
    def root(self) -> Path:
        """The folder relative screenshot paths resolve against."""
        return Path(self.data_root) if self.data_root else Path.cwd()


def split_options(options: dict[str, Any], where: str = "options") -> tuple[dict, dict, dict]:
    """One flat mapping -> (RewardConfig, PipelineConfig, engine) keyword arguments, the engine's being
    HFEngineConfig's, `engine` with VLLMOptions's for the vLLM engine (`engine: vllm`) and, for a
    verifier on a server, RemoteConfig's (`openai_url`, ...); an unknown key is an error that names it
    and lists the known ones."""
    groups = [{f.name for f in dataclasses.fields(c)} for c in (RewardConfig, PipelineConfig, HFEngineConfig)]
    groups[2] |= REMOTE_FIELDS | ENGINE_OPTIONS | {"engine"}
    out: tuple[dict, dict, dict] = ({}, {}, {})
    for key, val in options.items():
        for names, dest in zip(groups, out):
            if key in names:
                dest[key] = val
                break
        else:
            known = sorted(set().union(*groups))
            raise ValueError(f"{where}: unknown option {key!r}; known options: {', '.join(known)}")
    return out


def load_options(path: str | Path) -> dict[str, Any]:
    """A flat option mapping from a YAML or JSON file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"reward config not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of option: value, got {type(data).__name__}")
    return data
