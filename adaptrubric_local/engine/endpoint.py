"""An OpenAI-compatible server (vLLM, SGLang, a hosted API) and how to call it: `Endpoint`, the one
description of a URL, a served model name, the environment variable holding the API key, the seconds
per HTTP attempt, the retries and the requests in flight, validated once, here. The remote verifier
(remote.py), a teacher (teacher.py), a judge (cascade/config.py) and the engine that calls any of
them (openai_engine.py) make one from their own fields, saying what they call each (`called`), so an
error names the flag or key the user wrote. The API key is read from the environment when a client
is made, never kept. Knows nothing about engines, requests or verdicts.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

FIELDS = ("url", "name", "api_key_env", "timeout", "max_retries", "concurrency")


def api_key_from_env(var: str) -> str:
    """The API key in environment variable `var`; 'EMPTY' (what vLLM/SGLang accept) when it is unset."""
    return os.environ.get(var) or "EMPTY"


@dataclass(frozen=True)
class Endpoint:
    """A server and how to call it. `url` is its /v1 base (None: no server given); `called`, per field,
    the name its config gives it (a flag, a key), used in errors."""

    url: str | None
    name: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 300.0
    max_retries: int = 3
    concurrency: int = 8
    called: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        say = {name: self.called.get(name, name) for name in FIELDS}
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"{say['url']} must start with http:// or https://, got {self.url!r}")
        if not self.api_key_env:
            raise ValueError(f"{say['api_key_env']} must name an environment variable")
        if self.concurrency < 1 or self.timeout <= 0 or self.max_retries < 0:
            raise ValueError(f"{say['concurrency']} must be >= 1, {say['timeout']} > 0 and {say['max_retries']} >= 0, "
                             f"got {self.concurrency}, {self.timeout}, {self.max_retries}")

    def client(self, timeout: float | None = None, max_retries: int | None = None, http_client=None):
        """An `openai.OpenAI` client for the server (the key read from the environment now); `http_client`
        replaces the default transport (a `CutOff`'s, whose calls in flight can be ended at once)."""
        import openai

        return openai.OpenAI(base_url=self.url, api_key=api_key_from_env(self.api_key_env),
                             timeout=self.timeout if timeout is None else timeout,
                             max_retries=self.max_retries if max_retries is None else max_retries,
                             http_client=http_client)

    def served_models(self, retries: int = 2, timeout: float | None = None) -> list[str]:
        """The model names the server serves (`GET {url}/models`), waiting at most `timeout` seconds
        (the endpoint's own timeout, capped at 60 s, when not given)."""
        timeout = min(self.timeout, 60.0) if timeout is None else timeout
        with self.client(timeout=timeout, max_retries=retries) as client:
            return [m.id for m in client.models.list()]

    def check(self, what: str = "teacher", reachable_only: bool = False) -> list[str]:
        """Ask the server once (`GET {url}/models`) before any record is sent: a ValueError naming the URL
        when it cannot be reached or does not answer as an OpenAI-compatible server, or when it does not
        serve `name` (the served names listed); the served names otherwise. `reachable_only`: only a
        server that cannot be reached is refused (a router in front of several servers, as verl's, may
        answer /models with other names or not at all)."""
        import openai

        url = self.url
        try:
            names = self.served_models(retries=0)
        except openai.APIStatusError:
            if reachable_only:
                return []
            raise ValueError(f"the {what} at {url} answered GET {url.rstrip('/')}/models with an error: is the URL "
                             "its /v1 base?") from None
        except Exception as exc:  # openai.APIConnectionError, APITimeoutError, a reply that is not a model list
            if reachable_only and not isinstance(exc, openai.APIConnectionError):
                return []
            why = " ".join(str(exc).split()) or type(exc).__name__
            raise ValueError(f"the {what} at {url} did not answer GET {url.rstrip('/')}/models "
                             f"({type(exc).__name__}: {why}): is the server running, and is the URL its /v1 "
                             "base?") from None
        if self.name and self.name not in names and not reachable_only:
            raise ValueError(f"the {what} at {url} does not serve {self.name!r} (it serves: "
                             f"{', '.join(names) or 'nothing'})")
        return names
