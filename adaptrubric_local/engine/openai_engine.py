"""An engine that sends each request to an OpenAI-compatible chat endpoint (vLLM, SGLang, a hosted
API): how a large judge is usually served. Used as a distillation teacher, so the whole AdaptRubric
pipeline (router, cues, fused prompt, selected screenshots) runs on it unchanged.

Each request becomes one user message: the prompt text, then each screenshot as a base64 data URL,
then the suffix text. Calls go through the `openai` client, which owns timeouts and retries
(connection errors, timeouts, 408/409/429/5xx are retried with backoff); concurrency is bounded by
a thread pool. A request that still fails, or whose reply has no message text, comes back as an
Output with `error` set; it never sinks the batch. Watched-token probabilities are not reported
(P(SCORE=1) stays None). Knows nothing about rubrics, routing or verdicts.
"""
from __future__ import annotations

import base64
import mimetypes
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .base import Engine, Output, Request


@dataclass
class OpenAIEngineConfig:
    """Where the teacher is served and how to call it."""

    base_url: str = field(metadata={"help": "endpoint base URL, e.g. http://host:8000/v1"})
    model: str = field(metadata={"help": "the served model name (the request's `model` field)"})
    api_key: str = field(default="EMPTY", metadata={"help": "API key (vLLM/SGLang accept any; hosted APIs need one)"})
    timeout: float = field(default=120.0, metadata={"help": "seconds per HTTP attempt"})
    max_retries: int = field(default=3, metadata={"help": "retries per request (the openai client's backoff)"})
    concurrency: int = field(default=8, metadata={"help": "requests in flight at once"})
    max_new_tokens: int = field(default=1024, metadata={"help": "cap on generated tokens per request"})
    temperature: float = field(default=0.0, metadata={"help": "sampling temperature (0: greedy)"})

    def __post_init__(self):
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.model:
            raise ValueError("model (the served model name) must not be empty")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {self.timeout}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        for name in ("concurrency", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


def data_url(path: str) -> str:
    """A file as a base64 data URL (`data:image/png;base64,...`)."""
    mime = mimetypes.guess_type(path)[0] or "image/png"
    return f"data:{mime};base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def chat_messages(req: Request, image_urls: Optional[list[str]] = None) -> list[dict]:
    """The chat messages for one request: prompt text, images in order, then suffix text. Without
    `image_urls` the images are named by path (for records; the wire format uses data URLs)."""
    urls = image_urls if image_urls is not None else list(req.images)
    content: list[dict] = [{"type": "text", "text": req.prompt}]
    content += [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    if req.suffix:
        content.append({"type": "text", "text": req.suffix})
    return [{"role": "user", "content": content}]


class OpenAIEngine(Engine):
    """A chat endpoint reached through the `openai` client, called with bounded concurrency."""

    def __init__(self, config: Optional[OpenAIEngineConfig] = None, **overrides):
        import openai

        self.config = config or OpenAIEngineConfig(**overrides)
        self.name = f"{self.config.model}@{self.config.base_url}"
        self.client = openai.OpenAI(base_url=self.config.base_url, api_key=self.config.api_key,
                                    timeout=self.config.timeout, max_retries=self.config.max_retries)
        self._pool = ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="teacher")

    def _one(self, req: Request) -> Output:
        try:
            messages = chat_messages(req, [data_url(p) for p in req.images])
        except OSError as exc:
            return Output(error=f"cannot read image: {exc}", n_images=len(req.images))
        cap = min(self.config.max_new_tokens, req.max_new_tokens or self.config.max_new_tokens)
        try:
            resp = self.client.chat.completions.create(model=self.config.model, messages=messages, max_tokens=cap,
                                                       temperature=self.config.temperature)
        except Exception as exc:  # openai.APIError and friends, after the client's retries
            return Output(error=f"{type(exc).__name__}: {exc}", n_images=len(req.images))
        choices = getattr(resp, "choices", None)
        text = choices[0].message.content if choices and getattr(choices[0], "message", None) else None
        if not isinstance(text, str):
            return Output(error="malformed reply: no choices[0].message.content", n_images=len(req.images))
        usage = getattr(resp, "usage", None)
        return Output(text=text, prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                      completion_tokens=getattr(usage, "completion_tokens", 0) or 0, n_images=len(req.images))

    def generate(self, requests: list[Request]) -> list[Output]:
        """One Output per Request, in order; requests run concurrently up to `concurrency`."""
        return list(self._pool.map(self._one, requests))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.client.close()
