"""The cascade's settings: which judge checks the student, which verdicts go to it (the band, the
spot checks) and the file `cascade fit` writes. Its fields are the `--judge-*`, `--escalate-band`,
`--spot-check` flags of `score` and the `judge` options of `RewardModel`.

The judge's endpoint fields make one `Endpoint` (engine/endpoint.py, which validates them), and the judge
is described as `distill collect`'s teacher is: `teacher()` turns these fields into the one
`TeacherConfig` (engine/teacher.py), whose `build()` asks an endpoint once before the first record.
Knows nothing about pipelines, verdict lines or scoring.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..engine.endpoint import FIELDS as ENDPOINT_FIELDS
from ..engine.endpoint import Endpoint
from ..engine.teacher import TeacherConfig

# the default band, measured with eval/cascade.py (docs/student-judge.md): p_success in [LO, HI] is unsure
DEFAULT_BAND = (0.1, 0.9)
SPOT_CHECK = 0.05  # the default --spot-check of score and cascade-fit
BAND_KIND = "adaptrubric-cascade-band"


@dataclass
class CascadeConfig:
    """A judge that checks a student's verdicts, and which verdicts it checks."""

    judge_url: str | None = field(default=None, metadata={
        "help": "a judge's OpenAI-compatible endpoint: it scores what --model is unsure of (docs/student-judge.md)"})
    judge_name: str | None = field(default=None, metadata={"help": "served model name at --judge-url"})
    judge_model: str | None = field(default=None, metadata={
        "help": "a local Qwen3-VL checkpoint run in this process as the judge (instead of --judge-url)"})
    judge_api_key_env: str = field(default="OPENAI_API_KEY", metadata={
        "help": "environment variable holding the judge endpoint's API key (unset: 'EMPTY')"})
    judge_concurrency: int = field(default=8, metadata={"help": "judge calls in flight at once"})
    judge_timeout: float = field(default=300.0, metadata={"help": "seconds per judge HTTP attempt"})
    judge_max_retries: int = field(default=3, metadata={"help": "retries per judge call"})
    judge_max_new_tokens: int | None = field(default=None, metadata={
        "help": "the judge's verifier token cap (a thinking judge needs room)", "none": "--verify-max-new-tokens"})
    escalate_band: tuple[float, float] | None = field(default=None, metadata={"nargs": 2,
        "metavar": ("LO", "HI"), "help": "send a verdict whose p_success is in [LO, HI] to the judge (unparsed, "
                                         "error and EVIDENCE_SUFFICIENT: no always go)",
        "none": f"--cascade-band's file, else {DEFAULT_BAND[0]} {DEFAULT_BAND[1]}"})
    cascade_band: str | None = field(default=None, metadata={"metavar": "BAND.json",
        "help": "the band file `adaptrubric cascade-fit` wrote (--escalate-band overrides it)"})
    spot_check: float = field(default=SPOT_CHECK, metadata={
        "help": "also send this fraction of trajectories to the judge at random (seeded, independent of the "
                "student's confidence): the sample that estimates the student's agreement on this data"})
    spot_check_seed: int = field(default=0, metadata={"help": "seed of the spot-check draw (per id, so --resume "
                                                              "draws the same ones)"})
    warn_below: float = field(default=0.9, metadata={
        "help": "warn when the upper end of the spot checks' 95% interval for the student's agreement with the "
                "judge falls below this (the reward has drifted, or the policy games the student)"})
    agreement_window: int = field(default=200, metadata={"no_flag": True,
        "help": "RewardModel and serve: the live agreement is over the last this many spot checks"})

    def __post_init__(self):
        if self.judge_url and self.judge_model:
            raise ValueError("give one judge: --judge-url URL with --judge-name NAME, or --judge-model M")
        if self.judge_url and not self.judge_url.startswith(("http://", "https://")):
            base = self.judge_url.rstrip("/")
            raise ValueError(f"--judge-url {self.judge_url!r} lacks http:// (or https://): give the judge's /v1 base, "
                             f"e.g. http://{base}{'' if base.endswith('/v1') else '/v1'}")
        if self.judge_url and not self.judge_name:
            raise ValueError("--judge-url needs --judge-name (the served model name)")
        if self.escalate_band is not None:
            self.escalate_band = check_band(self.escalate_band, "--escalate-band")
        if not 0.0 <= self.spot_check <= 1.0:
            raise ValueError(f"--spot-check must be a fraction in [0, 1], got {self.spot_check}")
        if not 0.0 <= self.warn_below <= 1.0 or self.agreement_window < 1:
            raise ValueError(f"warn_below must be in [0, 1] and agreement_window >= 1, got {self.warn_below}, "
                             f"{self.agreement_window}")
        self.endpoint()  # validates the judge endpoint's fields

    def endpoint(self) -> Endpoint:
        """The judge's endpoint (url None for a local judge)."""
        return Endpoint(self.judge_url, self.judge_name, self.judge_api_key_env, self.judge_timeout,
                        self.judge_max_retries, self.judge_concurrency,
                        called={f: "--judge-" + f.replace("_", "-") for f in ENDPOINT_FIELDS})

    @property
    def enabled(self) -> bool:
        """Whether a judge was given (the cascade runs)."""
        return bool(self.judge_url or self.judge_model)

    def band(self) -> tuple[float, float]:
        """The band in use: --escalate-band, else the --cascade-band file's, else DEFAULT_BAND."""
        if self.escalate_band is not None:
            return self.escalate_band
        if self.cascade_band:
            return read_band(self.cascade_band)["band"]
        return DEFAULT_BAND

    def teacher(self, verify_max_new_tokens: int) -> TeacherConfig:
        """The judge as distill collect's teacher description (one builder, one endpoint check)."""
        judge = self.endpoint()
        return TeacherConfig(teacher_model=self.judge_model, teacher_url=judge.url, teacher_name=judge.name,
                             api_key_env=judge.api_key_env, timeout=judge.timeout, max_retries=judge.max_retries,
                             concurrency=judge.concurrency,
                             teacher_max_new_tokens=self.judge_max_new_tokens or verify_max_new_tokens)

    def describe(self) -> dict:
        """What the config sidecar records (never the key)."""
        return {"judge": {"kind": "url" if self.judge_url else "model", "name": self.judge_name or self.judge_model,
                          "url": self.judge_url, "max_new_tokens": self.judge_max_new_tokens},
                "band": list(self.band()), "band_file": self.cascade_band, "spot_check": self.spot_check,
                "spot_check_seed": self.spot_check_seed, "warn_below": self.warn_below}


JUDGE_FIELDS = frozenset(f.name for f in fields(CascadeConfig))


def judge_config(judge: Any, engine: Any = None) -> CascadeConfig | None:
    """RewardModel's `judge` as a CascadeConfig (None: no judge); a mapping's unknown key is an error
    naming it. With a judge `engine` given, `judge` may be None (the defaults) and names no endpoint."""
    if judge is None and engine is None:
        return None
    if isinstance(judge, CascadeConfig):
        cfg = judge
    elif judge is None or isinstance(judge, Mapping):
        unknown = sorted(set(judge or {}) - JUDGE_FIELDS)
        if unknown:
            raise ValueError(f"judge: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(JUDGE_FIELDS))}")
        cfg = CascadeConfig(**(judge or {}))
    else:
        raise ValueError(f"judge must be a CascadeConfig or a mapping of its fields, got {type(judge).__name__}")
    if engine is None and not cfg.enabled:
        raise ValueError("judge needs judge_url with judge_name, judge_model, or judge_engine")
    if engine is not None and cfg.enabled:
        raise ValueError("give the judge as judge_engine or as judge_url/judge_model, not both")
    return cfg


def check_band(band, what: str) -> tuple[float, float]:
    """A (LO, HI) band with 0 <= LO <= HI <= 1; ValueError naming `what` otherwise."""
    try:
        lo, hi = (float(x) for x in band)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be two numbers LO HI, got {band!r}") from None
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"{what} must satisfy 0 <= LO <= HI <= 1, got {lo} {hi}")
    return lo, hi


def read_band(path: str | Path) -> dict:
    """A band file from `cascade-fit`; ValueError naming the file and field when it is not one."""
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read the band file ({exc})") from None
    if not isinstance(d, dict) or d.get("kind") != BAND_KIND:
        raise ValueError(f"{path}: not a band file of `adaptrubric cascade-fit` (field 'kind' is not {BAND_KIND!r})")
    d["band"] = check_band(d.get("band"), f"{path}: field 'band'")
    return d
