"""Which teacher to ask and how: the one description of a teacher that `distill collect`, `bank
induce` and `bank refine` share (their flags come from these fields), and the engine it builds: a
local Qwen3-VL checkpoint (`teacher_model`) or an OpenAI-compatible endpoint (`teacher_url` +
`teacher_name`, one `Endpoint`). The API key comes only from the environment variable `api_key_env`;
`describe()` (what manifests and model cards record) holds none. Knows nothing about rubrics, banks
or distillation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .base import Engine
from .endpoint import Endpoint
from .hf_config import at_least

# the flag of each of the endpoint's fields
CALLED = {"url": "--teacher-url", "name": "--teacher-name", "api_key_env": "--api-key-env", "timeout": "--timeout",
          "max_retries": "--max-retries", "concurrency": "--concurrency"}


@dataclass
class TeacherConfig:
    """A teacher model and how to call it."""

    teacher_model: str | None = field(default=None, metadata={"common": "teacher",
        "help": "a local Qwen3-VL checkpoint (hub id or folder) run by this package"})
    teacher_url: str | None = field(default=None, metadata={"common": "teacher",
        "help": "OpenAI-compatible endpoint base URL, e.g. http://judge:8000/v1"})
    teacher_name: str | None = field(default=None, metadata={"common": "teacher",
        "help": "served model name at --teacher-url"})
    api_key_env: str = field(default="OPENAI_API_KEY", metadata={
        "help": "environment variable holding the endpoint's API key (unset: 'EMPTY', which vLLM/SGLang accept)"})
    timeout: float = field(default=300.0, metadata={"help": "seconds per HTTP attempt (thinking judges are slow)"})
    max_retries: int = field(default=3, metadata={"help": "retries per teacher call (the openai client's backoff)"})
    concurrency: int = field(default=8, metadata={"help": "teacher calls in flight at once"})
    teacher_max_new_tokens: int = field(default=2048, metadata={
        "help": "token cap per teacher reply; a thinking teacher needs room for its reasoning"})
    teacher_max_visual_tokens: int | None = field(default=None, metadata={
        "help": "show the teacher each trajectory's screenshots at this visual-token budget (what a student "
                "trained and scored with the same budget sees)", "none": "the original files"})
    teacher_max_pixels: int | None = field(default=None, metadata={
        "help": "per-image pixel cap for the teacher's images", "none": "the processor's"})
    teacher_batch_size: int = field(default=8, metadata={"help": "requests per generate call of a local teacher"})
    teacher_load_in_4bit: bool = field(default=False, metadata={"help": "load a local teacher in 4-bit (nf4)"})

    def __post_init__(self):
        if self.teacher_url and not self.teacher_name:
            raise ValueError("--teacher-url needs --teacher-name (the served model name)")
        at_least(self, 1, "teacher_max_new_tokens")
        self.endpoint()  # validates the endpoint's fields

    def endpoint(self) -> Endpoint:
        """The endpoint teacher (url None for a local one)."""
        return Endpoint(self.teacher_url, self.teacher_name, self.api_key_env, self.timeout, self.max_retries,
                        self.concurrency, called=CALLED)

    @property
    def kind(self) -> str | None:
        """'url', 'model', or None when neither is set."""
        return "url" if self.teacher_url else ("model" if self.teacher_model else None)

    def describe(self) -> dict:
        """What a manifest records about the teacher (never the key)."""
        url = self.teacher_url
        which = ({"kind": "url", "name": self.teacher_name, "url": url} if url
                 else {"kind": "model", "name": self.teacher_model})
        if self.teacher_max_visual_tokens is None and self.teacher_max_pixels is None:
            images = {"resized": False} if url else {"resized": False, "note": "the processor's own"}
        else:
            images = {"resized": True, "max_visual_tokens": self.teacher_max_visual_tokens,
                      "max_pixels": self.teacher_max_pixels}
        return {**which, "max_new_tokens": self.teacher_max_new_tokens, "images": images}

    def build(self, check: bool = True, what: str = "teacher") -> Engine:
        """The teacher engine (exactly one of a local model or an endpoint must be set); an endpoint is
        asked once first (`check`: `Endpoint.check`), so a wrong URL or a name it does not serve stops the
        command before its first record (the message calls it `what`: the teacher, the judge)."""
        if bool(self.teacher_model) == bool(self.teacher_url):
            raise ValueError("give exactly one teacher: --teacher-model M, or --teacher-url URL with --teacher-name "
                             "NAME")
        if self.teacher_url:
            from .openai_engine import OpenAIEngine, OpenAIEngineConfig

            if check:
                self.endpoint().check(what)
            return OpenAIEngine(OpenAIEngineConfig(
                endpoint=self.endpoint(), max_new_tokens=self.teacher_max_new_tokens,
                max_visual_tokens=self.teacher_max_visual_tokens, max_pixels=self.teacher_max_pixels))
        from .build import build_engine

        return build_engine(model=self.teacher_model, max_new_tokens=self.teacher_max_new_tokens,
                            max_batch_size=self.teacher_batch_size, load_in_4bit=self.teacher_load_in_4bit,
                            max_visual_tokens=self.teacher_max_visual_tokens, max_pixels=self.teacher_max_pixels)
