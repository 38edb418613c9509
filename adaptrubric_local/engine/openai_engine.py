"""An engine that sends each request to an OpenAI-compatible chat endpoint (vLLM, SGLang, a hosted
API): how a large judge is usually served, e.g. as a distillation teacher.

Each request is one user message: the prompt, each screenshot as a base64 data URL (the original file,
or resized to a visual-token budget so a teacher sees what a student will), then the suffix. The
server is an `Endpoint` (endpoint.py); its `openai` client owns timeouts and retries and a thread pool
bounds concurrency. A thinking model's reasoning is kept apart in `Output.reasoning`; `hit_cap`,
`hit_context` and watched tokens' probabilities (from `logprobs`) as the other engines; a failed call
is an Output with `error`. Knows nothing about rubrics, routing or verdicts.
"""
from __future__ import annotations

import base64
import math
import mimetypes
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, fields
from pathlib import Path

from .base import Engine, Output, Request, TokenProbs, length_reason
from .endpoint import Endpoint
from .hf_config import at_least

# Qwen3-VL's published preprocessor bounds ("size": shortest_edge / longest_edge), used to plan a
# teacher's resized images exactly as a Qwen3-VL student's processor would
QWEN3VL_MIN_PIXELS, QWEN3VL_MAX_PIXELS = 65_536, 16_777_216


@dataclass
class OpenAIEngineConfig:
    """Where the model is served (`endpoint`, with its served name) and what each request asks for."""

    endpoint: Endpoint = field(metadata={"help": "the server, its served model name and how to call it"})
    max_new_tokens: int = field(default=1024, metadata={"help": "cap on generated tokens per request"})
    temperature: float = field(default=0.0, metadata={"help": "sampling temperature (0: greedy)"})
    top_logprobs: int = field(default=5, metadata={
        "help": "alternatives per position asked for when a request watches tokens (0: ask for no logprobs)"})
    max_visual_tokens: int | None = field(default=None, metadata={
        "help": "resize each request's images to this visual-token budget before sending, as a Qwen3-VL "
                "student with the same budget sees them (default: send the original files)"})
    max_pixels: int | None = field(default=None, metadata={
        "help": "per-image pixel cap for that resizing (default: Qwen3-VL's, 16777216)"})

    def __post_init__(self):
        if not self.endpoint.url:
            raise ValueError("the endpoint's url must be given")
        if not self.endpoint.name:
            raise ValueError("the endpoint's name (the served model name) must not be empty")
        at_least(self, 1, "max_new_tokens")
        at_least(self, 4, "max_visual_tokens")
        check_top_logprobs("top_logprobs", self.top_logprobs)

    def settings(self) -> dict:
        """The fields as a settings record writes them: the endpoint's as `base_url`, `model`, `api_key_env`
        (the variable, never the key), `timeout`, `max_retries`, `concurrency`, then the others."""
        e = self.endpoint
        return {"base_url": e.url, "model": e.name, "api_key_env": e.api_key_env, "timeout": e.timeout,
                "max_retries": e.max_retries, "concurrency": e.concurrency,
                **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "endpoint"}}


def check_top_logprobs(name: str, value: int) -> None:
    """ValueError naming option `name` when `value` is outside the OpenAI API's range of top_logprobs."""
    if not 0 <= value <= 20:
        raise ValueError(f"{name} must be in [0, 20] (the OpenAI API's range), got {value}")


def data_url(path: str, data: bytes | None = None) -> str:
    """A file (or `data` of its type) as a base64 data URL (`data:image/png;base64,...`)."""
    mime = mimetypes.guess_type(path)[0] or "image/png"
    return f"data:{mime};base64," + base64.b64encode(Path(path).read_bytes() if data is None else data).decode("ascii")


def resized_data_urls(paths: list[str], cfg: OpenAIEngineConfig) -> list[str]:
    """One request's images as PNG data URLs, resized as a Qwen3-VL processor with the config's
    visual-token budget and pixel cap would resize them (so teacher and student see the same pixels)."""
    import io

    from .images import ImageConfig, image_size, resized_images, target_sizes

    icfg = ImageConfig(min_pixels=QWEN3VL_MIN_PIXELS, max_pixels=cfg.max_pixels or QWEN3VL_MAX_PIXELS,
                       max_visual_tokens=cfg.max_visual_tokens, workers=1)
    urls = []
    for img in resized_images(paths, target_sizes([image_size(p) for p in paths], icfg)):
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        urls.append(data_url("image.png", buf.getvalue()))
    return urls


def watched_probs(text: str, logprobs, watch: tuple[str, ...]) -> list[TokenProbs]:
    """TokenProbs at every position where a watched token (e.g. "0"/"1") was generated, from a reply's
    `logprobs.content`: each watched token's probability, summed over spellings that differ only in
    surrounding whitespace. Offsets are in `text`; logprob tokens of reasoning that precede the answer
    (servers that count them) and of an end-of-turn token that follows it (vLLM lists `<|im_end|>`) are
    skipped. Empty when the tokens do not spell out the text."""
    items = list(getattr(logprobs, "content", None) or [])
    tokens = [getattr(it, "token", "") or "" for it in items]
    shift = "".join(tokens).rfind(text) if text else -1
    if not items or shift < 0:
        return []
    out, pos = [], 0
    for it, tok in zip(items, tokens):
        start, pos = pos, pos + len(tok)
        if tok.strip() not in watch or start < shift or start >= shift + len(text):
            continue
        alts = {tok: it.logprob}
        for alt in getattr(it, "top_logprobs", None) or []:
            alts.setdefault(alt.token, alt.logprob)
        probs = {w: sum(math.exp(lp) for t, lp in alts.items() if t.strip() == w) for w in watch}
        out.append(TokenProbs(offset=start - shift + len(tok) - len(tok.lstrip()), probs=probs))
    return out


def chat_messages(req: Request, image_urls: list[str] | None = None) -> list[dict]:
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

    def __init__(self, config: OpenAIEngineConfig | None = None, **overrides):
        from .cutoff import CutOff

        self.config = config or OpenAIEngineConfig(**overrides)
        endpoint = self.config.endpoint
        self.name = f"{endpoint.name}@{endpoint.url}"
        self.cutoff = CutOff()  # cut() ends the calls in flight at once (a server that stopped answering)
        self.client = endpoint.client(http_client=self.cutoff.client(timeout=endpoint.timeout))
        self._pool = ThreadPoolExecutor(max_workers=endpoint.concurrency, thread_name_prefix="teacher")

    def _one(self, req: Request) -> Output:
        n = len(req.images)
        try:
            resize = self.config.max_visual_tokens is not None or self.config.max_pixels is not None
            messages = chat_messages(req, resized_data_urls(req.images, self.config) if resize and req.images
                                     else [data_url(p) for p in req.images])
        except (OSError, ValueError, RuntimeError) as exc:
            return Output(error=f"cannot read image: {exc}", n_images=n)
        cap = req.cap(self.config.max_new_tokens)
        extra = {"logprobs": True, "top_logprobs": self.config.top_logprobs} if (
            req.watch and self.config.top_logprobs) else {}
        try:
            resp = self.client.chat.completions.create(model=self.config.endpoint.name, messages=messages,
                                                       max_tokens=cap, temperature=self.config.temperature, **extra)
        except Exception as exc:  # openai.APIError and friends, after the client's retries
            msg = f"{type(exc).__name__}: {exc}"
            if any(s in str(exc).lower() for s in ("context length", "max_model_len", "maximum model length")):
                msg += (" (the prompt does not fit the server's context: start it with a larger --max-model-len, or "
                        "send fewer or smaller screenshots: --max-images, --max-visual-tokens)")
            return Output(error=msg, n_images=n)
        choices = getattr(resp, "choices", None)
        message = getattr(choices[0], "message", None) if choices else None
        if message is None:
            return Output(error="malformed reply: no choices[0].message", n_images=n)
        text = message.content if isinstance(message.content, str) else ""
        reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
        cut = getattr(choices[0], "finish_reason", None) == "length"
        if not text and not cut and not reasoning:
            return Output(error="malformed reply: no choices[0].message.content", n_images=n)
        usage = getattr(resp, "usage", None)
        completion = getattr(usage, "completion_tokens", None)
        why = length_reason(completion, cap) if cut else None
        probs = watched_probs(text, getattr(choices[0], "logprobs", None), req.watch) if req.watch else []
        reasoning = reasoning if isinstance(reasoning, str) else None
        # a reasoning parser returns no content while the model is still thinking (cut by the cap): the
        # output has not left its thinking, as an in-process Thinking checkpoint's would not have
        return Output(text=text, prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                      completion_tokens=completion or 0, n_images=n, hit_cap=why == "cap",
                      hit_context=why == "context", token_probs=probs, reasoning=reasoning,
                      opened_thinking=bool(reasoning) and not text.strip())

    def generate(self, requests: list[Request]) -> list[Output]:
        """One Output per Request, in order; requests run concurrently up to `concurrency`."""
        return list(self._pool.map(self._one, requests))

    def generate_iter(self, requests: list[Request]) -> Iterator[list[tuple[int, Output]]]:
        """[(index, Output)] per request as each reply arrives."""
        futures = {self._pool.submit(self._one, r): i for i, r in enumerate(requests)}
        for f in as_completed(futures):
            yield [(futures[f], f.result())]

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.client.close()
