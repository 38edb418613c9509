"""The verifier on an OpenAI-compatible server (vLLM, SGLang, a hosted API) instead of in-process:
which server, and how to call it. `RemoteConfig`'s fields are the `--openai-*` flags of every
command that scores and the `openai_*` keys of a reward config; with `openai_url` set, `model` is
the served model name (when omitted: the server's only one) and `remote_engine` builds the one
remote engine (openai_engine.py, shared with the distillation teacher), so the paper's router, cues
and verifier all run on the server.

What the in-process engine's options mean there: `model` is the served name, `max_new_tokens` the
cap per call, `max_visual_tokens`/`max_pixels` resize screenshots before sending (default: the
original files, which the server's processor resizes as the paper's setting does). Options that
would change what the verifier says and that a server cannot honour through this API (`adapter`,
`votes` > 1, 4/8-bit loading) are an error; the rest (dtype, batch sizes, attention) belong to the
server and are ignored. The API key comes from the environment variable `openai_api_key_env`,
never from a flag or a config value, so no record of a run can hold it.

The prefix keeps these apart from the reward service's own `api_key_env` and the teacher's flags.
Knows nothing about rubrics, pipelines or verdicts.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .base import Engine
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
        if self.openai_url is not None and not self.openai_url.startswith(("http://", "https://")):
            raise ValueError(f"openai_url must start with http:// or https://, got {self.openai_url!r}")
        if not self.openai_api_key_env:
            raise ValueError("openai_api_key_env must name an environment variable")
        if self.openai_concurrency < 1 or self.openai_timeout <= 0 or self.openai_max_retries < 0:
            raise ValueError("openai_concurrency must be >= 1, openai_timeout > 0 and openai_max_retries >= 0")
        if not 0 <= self.openai_top_logprobs <= 20:
            raise ValueError(f"openai_top_logprobs must be in [0, 20] (the OpenAI API's range), got "
                             f"{self.openai_top_logprobs}")


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
    from .openai_engine import OpenAIEngine, OpenAIEngineConfig

    rc = check_remote(options)
    model = options.get("model")
    if model:  # one request before any record: a wrong URL or served name stops here, naming it
        check_endpoint(rc.openai_url, model, rc.openai_api_key_env, rc.openai_timeout, what="verifier server",
                       reachable_only=True)
    else:
        model = only_model(rc)
    return OpenAIEngine(OpenAIEngineConfig(
        base_url=rc.openai_url, model=model, api_key_env=rc.openai_api_key_env, timeout=rc.openai_timeout,
        max_retries=rc.openai_max_retries, concurrency=rc.openai_concurrency,
        max_new_tokens=options.get("max_new_tokens") or 1024, top_logprobs=rc.openai_top_logprobs,
        max_visual_tokens=options.get("max_visual_tokens"), max_pixels=options.get("max_pixels")))


def only_model(rc: RemoteConfig) -> str:
    """The name of the one model the server serves; ValueError when it serves none or several."""
    names = served_models(rc.openai_url, rc.openai_api_key_env, rc.openai_timeout)
    if len(names) != 1:
        raise ValueError(f"{rc.openai_url} serves {len(names)} models ({', '.join(names) or 'none'}): name the "
                         "verifier with model (--model)")
    return names[0]


def check_endpoint(url: str, name: str | None, api_key_env: str = "OPENAI_API_KEY", timeout: float = 30.0,
                   what: str = "teacher", reachable_only: bool = False) -> list[str]:
    """Ask a teacher's or judge's endpoint once (`GET {url}/models`) before any record is sent: a
    ValueError naming the URL when it cannot be reached or does not answer as an OpenAI-compatible
    server, or when it does not serve `name` (the served names listed); the served names otherwise.
    `reachable_only`: only a server that cannot be reached is refused (a router in front of several
    servers, as verl's, may answer /models with other names or not at all)."""
    import openai

    try:
        names = served_models(url, api_key_env, timeout, retries=0)
    except openai.APIStatusError:
        if reachable_only:
            return []
        raise ValueError(f"the {what} at {url} answered GET {url.rstrip('/')}/models with an error: is the URL "
                         "its /v1 base?") from None
    except Exception as exc:  # openai.APIConnectionError, APITimeoutError, a reply that is not a model list
        if reachable_only and not isinstance(exc, openai.APIConnectionError):
            return []
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"the {what} at {url} did not answer GET {url.rstrip('/')}/models ({type(exc).__name__}: "
                         f"{why}): is the server running, and is the URL its /v1 base?") from None
    if name and name not in names and not reachable_only:
        raise ValueError(f"the {what} at {url} does not serve {name!r} (it serves: {', '.join(names) or 'nothing'})")
    return names


def served_models(openai_url: str, api_key_env: str = "OPENAI_API_KEY", timeout: float = 30.0,
                  retries: int = 2) -> list[str]:
    """The model names a server serves (`GET {openai_url}/models`)."""
    import openai

    from .openai_engine import api_key_from_env

    with openai.OpenAI(base_url=openai_url, api_key=api_key_from_env(api_key_env), timeout=min(timeout, 60.0),
                       max_retries=retries) as client:
        return [m.id for m in client.models.list()]


@register_engine("openai", reads=("max_visual_tokens", "max_pixels"), instead={
    "adapter": "serve the adapter on the server (vLLM: --lora-modules NAME=DIR) and pass NAME as `model`",
    "votes": "use `votes=1` (sampled votes are not supported on a server)"},
    otherwise="use the server's own setting (vLLM: a vllm serve flag)", in_process=False,
    help="an OpenAI-compatible server at openai_url (--openai-url)")
def _openai(model=None, **options) -> Engine:
    return remote_engine({**options, **({"model": model} if model else {})})
