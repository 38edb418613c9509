"""The verifier on an OpenAI-compatible server (vLLM, SGLang, a hosted API) instead of in-process.
`RemoteConfig`'s fields are the `--openai-*` flags of every command that scores and the `openai_*`
keys of a reward config (the prefix keeps them apart from the reward service's and the teacher's);
with `openai_url` set, `remote_engine` builds the remote engine (openai_engine.py), so router, cues
and verifier all run on the server. There `model` is the served name (omitted: the server's only
one), `max_new_tokens` the cap per call, `max_visual_tokens`/`max_pixels` resize screenshots before
sending (default: the original files). Options that would change what the verifier says and that a
server cannot honour (`adapter`, `votes` > 1, 4/8-bit loading) are an error; the rest belong to the
server and are ignored. The server's fields make one `Endpoint` (endpoint.py); the API key comes
only from the environment variable `openai_api_key_env`, so no record of a run can hold it.
Knows nothing about rubrics, pipelines or verdicts.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .base import Engine
from .endpoint import FIELDS as ENDPOINT_FIELDS
from .endpoint import Endpoint
from .openai_engine import OpenAIEngine, OpenAIEngineConfig, check_top_logprobs
from .options import advice, plain, register_engine, render

# in-process options that change what the verifier says, with the value that means "not used" (what to use
# instead: the openai engine's registration below)
NOT_REMOTE = {"adapter": None, "votes": 1, "load_in_4bit": False, "load_in_8bit": False}


@dataclass
class RemoteConfig:
    """An OpenAI-compatible server that runs the verifier."""

    openai_url: str | None = field(default=None, metadata={"common": "model and engine",
        "help": "run the verifier (router, cues and verdicts) on this OpenAI-compatible server, e.g. "
                "http://host:8000/v1 (vLLM, SGLang, a hosted API); --model is then the served model name"})
    openai_api_key_env: str = field(default="OPENAI_API_KEY", metadata={
        "help": "environment variable holding the server's API key (unset: 'EMPTY', which vLLM and SGLang "
                "accept); the key itself is never a flag"})
    openai_concurrency: int = field(default=16, metadata={"help": "requests in flight to the server at once"})
    openai_timeout: float = field(default=300.0, metadata={"help": "seconds per HTTP attempt"})
    openai_max_retries: int = field(default=3, metadata={
        "help": "retries per request on connection errors, timeouts, 408/409/429/5xx (the openai client's backoff)"})
    openai_top_logprobs: int = field(default=5, metadata={
        "help": "alternatives asked for at each verdict token, for p_success (0: ask for no logprobs; p_success "
                "is then null)"})

    def __post_init__(self):
        self.endpoint()  # validates the server's fields
        check_top_logprobs("openai_top_logprobs", self.openai_top_logprobs)

    def endpoint(self, model: str | None = None) -> Endpoint:
        """The server as an Endpoint serving `model`."""
        return Endpoint(self.openai_url, model, self.openai_api_key_env, self.openai_timeout, self.openai_max_retries,
                        self.openai_concurrency, called={f: f"openai_{f}" for f in ENDPOINT_FIELDS})


REMOTE_FIELDS = frozenset(f.name for f in fields(RemoteConfig))


def is_remote(options: Mapping[str, Any]) -> bool:
    """Whether a mapping of engine options names a server (`openai_url`)."""
    return bool(options.get("openai_url"))


def check_remote(options: Mapping[str, Any]) -> RemoteConfig:
    """The RemoteConfig of a flat mapping of engine options; ValueError, naming the option, for one
    that a server cannot honour."""
    rc = RemoteConfig(**{k: v for k, v in options.items() if k in REMOTE_FIELDS})
    if not rc.openai_url:
        raise ValueError("no openai_url given")
    for name, unused in NOT_REMOTE.items():
        if options.get(name, unused) != unused:
            raise ValueError(f"{name}={options[name]!r} cannot be used with openai_url: "
                             f"{render(advice(name, 'openai'), plain)}")
    return rc


def remote_engine(options: Mapping[str, Any]) -> Engine:
    """The remote engine for a flat mapping of engine options (RemoteConfig fields plus the in-process
    engine's `model`, `max_new_tokens`, `max_visual_tokens`, `max_pixels`). Without `model`, the
    server's one served model is used (asked with GET /models)."""
    rc = check_remote(options)
    endpoint = rc.endpoint(options.get("model"))
    if endpoint.name:  # one request before any record: a wrong URL or served name stops here, naming it
        endpoint.check(what="verifier server", reachable_only=True)
    else:  # the one model the server serves
        names = endpoint.served_models()
        if len(names) != 1:
            raise ValueError(f"{endpoint.url} serves {len(names)} models ({', '.join(names) or 'none'}): name the "
                             "verifier with model (--model)")
        endpoint = rc.endpoint(names[0])
    return OpenAIEngine(OpenAIEngineConfig(
        endpoint=endpoint, max_new_tokens=options.get("max_new_tokens") or 1024, top_logprobs=rc.openai_top_logprobs,
        max_visual_tokens=options.get("max_visual_tokens"), max_pixels=options.get("max_pixels")))


@register_engine("openai", reads=("max_visual_tokens", "max_pixels"), instead={
    "adapter": "serve the adapter on the server (vLLM: --lora-modules NAME=DIR) and pass NAME as `model`",
    "votes": "use `votes=1` (sampled votes are not supported on a server)"},
    otherwise="use the server's own setting (vLLM: a vllm serve flag)", in_process=False,
    help="an OpenAI-compatible server at openai_url (--openai-url)")
def _openai(model=None, **options) -> Engine:
    return remote_engine({**options, **({"model": model} if model else {})})
