"""adaptrubric-local: AdaptRubric outcome rewards for GUI-agent trajectories, run in-process.

Public API: the data model (Trajectory, Step, Verdict), loaders (load_trajectories), the verdict
parser (parse_verdict), the orchestrator (AdaptRubric, PipelineConfig) and the engines.
Heavy dependencies (torch, transformers) are imported only by the transformers engine.
"""
from ._version import __version__
from .bank import RubricBank, load_bank
from .dry_run import FakeEngine
from .engine.base import Engine, Output, Request
from .formats import DataError, detect_format, load_trajectories
from .pipeline import AdaptRubric, PipelineConfig
from .reward_model import RewardModel
from .types import FAMILIES, CueResult, RouteResult, Step, Trajectory, Verdict
from .verdict import parse_verdict

__all__ = ["__version__", "FAMILIES", "Step", "Trajectory", "Verdict", "RouteResult", "CueResult",
           "parse_verdict", "DataError", "detect_format", "load_trajectories", "RubricBank", "load_bank",
           "Engine", "Request", "Output", "FakeEngine", "AdaptRubric", "PipelineConfig", "RewardModel"]
