"""adaptrubric-local: AdaptRubric outcome rewards for GUI-agent trajectories, run in-process.

Public API: the data model (Trajectory, Step, Verdict), loaders (load_trajectories), the verdict
parser (parse_verdict), the orchestrator (AdaptRubric, PipelineConfig) and the engines.
Heavy dependencies (torch, transformers) are imported only by the transformers engine.
"""
__version__ = "0.1.0"

from .types import FAMILIES, CueResult, RouteResult, Step, Trajectory, Verdict  # noqa: E402
from .verdict import parse_verdict  # noqa: E402
from .formats import DataError, detect_format, load_trajectories  # noqa: E402
from .bank import RubricBank, load_bank  # noqa: E402
from .engine.base import Engine, Output, Request  # noqa: E402
from .engine.fake import FakeEngine  # noqa: E402
from .pipeline import AdaptRubric, PipelineConfig  # noqa: E402
from .reward_model import RewardModel  # noqa: E402

__all__ = ["__version__", "FAMILIES", "Step", "Trajectory", "Verdict", "RouteResult", "CueResult",
           "parse_verdict", "DataError", "detect_format", "load_trajectories", "RubricBank", "load_bank",
           "Engine", "Request", "Output", "FakeEngine", "AdaptRubric", "PipelineConfig", "RewardModel"]
