"""adaptrubric-local: AdaptRubric outcome rewards for GUI-agent trajectories, run in-process.

    from adaptrubric_local import Verifier, load_trajectories

    with Verifier("Qwen/Qwen3-VL-4B-Instruct") as v:
        verdicts = v.score(load_trajectories("trajectories.jsonl"))
        rewards = v.rewards(verdicts)

Public API (`__all__`): the front door (Verifier), the RL reward (RewardModel), the data model and its
loaders, the settings, what `adaptrubric score` and `eval` run, the pipeline and engine interface, and
the extension points. Importing the package imports no torch, transformers or vLLM.
"""
from ._version import __version__
from .bank import RubricBank, load_bank
from .dry_run import FakeEngine
from .engine.base import Engine, Output, Request
from .engine.hf_config import HFEngineConfig
from .engine.options import register_engine
from .engine.remote import RemoteConfig
from .engine.vllm_engine import VLLMOptions
from .evaluation.harness import load_verdicts, run_eval
from .evaluation.metrics import evaluate
from .formats import DataError, detect_format, load_trajectories, register_format
from .pipeline import AdaptRubric, PipelineConfig
from .registry import load_plugins
from .rewards.config import RewardConfig
from .rewards.model import RewardModel
from .scoring import score_file
from .types import FAMILIES, CueResult, RouteResult, Step, Trajectory, Verdict
from .verdict import parse_verdict
from .verifier import Verifier

__all__ = ["FAMILIES", "AdaptRubric", "CueResult", "DataError", "Engine", "FakeEngine", "HFEngineConfig", "Output",
           "PipelineConfig", "RemoteConfig", "Request", "RewardConfig", "RewardModel", "RouteResult", "RubricBank",
           "Step", "Trajectory", "VLLMOptions", "Verdict", "Verifier", "__version__", "detect_format", "evaluate",
           "load_bank", "load_plugins", "load_trajectories", "load_verdicts", "parse_verdict", "register_engine",
           "register_format", "run_eval", "score_file"]
