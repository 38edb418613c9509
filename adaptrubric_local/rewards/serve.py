"""The reward service: one verifier per GPU shared by every rollout worker (`adaptrubric serve`).

FastAPI on uvicorn. Requests from concurrent clients go into the RewardModel's scoring thread, which
gathers what arrives within a short window into one engine batch and shares the route/cue cache across
clients. Endpoints (GET /health, GET /stats, POST /score, POST /openrlhf and /get_reward), their bodies,
limits and status codes: docs/rewards.md, "The HTTP API". SIGTERM/Ctrl-C stops accepting, lets in-flight
requests finish, then drains the queue before exiting.

Security: paths in requests must lie inside the RewardModel's data_root or image_roots (rewards/inputs.py,
`confine`); with an API key every request must carry `Authorization: Bearer <key>` (compared in constant
time) or gets 401 before its body is read; the service refuses to bind anything but a loopback address
without a key, unless `insecure` is set. Inline screenshots (images.py) live in a private temporary folder
for the time of their request. The key does not make plain HTTP private: on an untrusted network put TLS
in front. Knows nothing about RL frameworks.
"""
# no `from __future__ import annotations`: FastAPI reads the handlers' annotations as objects

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from ..types import Verdict
from .batcher import QueueFull
from .images import ImageStore
from .inputs import load_items
from .model import RewardModel

log = logging.getLogger("adaptrubric.serve")


@dataclass
class ServeConfig:
    """Where the service listens and what it refuses."""

    host: str = field(default="127.0.0.1", metadata={"common": "service",
        "help": "address to bind (0.0.0.0 to serve other hosts: needs an API key, or --insecure)"})
    port: int = field(default=8000, metadata={"common": "service", "help": "TCP port"})
    max_request_bytes: int = field(default=8 << 20, metadata={"help": "largest request body accepted (413 above)"})
    max_items: int = field(default=256, metadata={"help": "most trajectories in one request (413 above)"})
    request_timeout_s: float = field(default=600.0, metadata={"help": "a request waits at most this long (504)"})
    graceful_timeout_s: float = field(default=120.0, metadata={"help": "on shutdown, wait this long for requests"})
    api_key: str | None = field(default=None, repr=False, metadata={
        "help": "the key every request must send as 'Authorization: Bearer <key>'; as a flag it shows in `ps` and "
                "shell history: prefer the variable named by --api-key-env (ADAPTRUBRIC_API_KEY) or --api-key-file"})
    insecure: bool = field(default=False, metadata={
        "help": "allow a non-loopback address without an API key (a trusted network only)"})

    def __post_init__(self):
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be 1-65535, got {self.port}")
        if self.max_request_bytes < 1 or self.max_items < 1 or self.request_timeout_s <= 0:
            raise ValueError("max_request_bytes, max_items and request_timeout_s must be positive")
        if not self.api_key:
            self.api_key = None
        if self.api_key is None and not self.insecure and not is_loopback(self.host):
            raise ValueError(
                f"refusing to serve on {self.host!r} without an API key: anyone who can reach that address could "
                "spend the GPU and have the verifier read any image the service can open. Set one in the "
                "environment (export ADAPTRUBRIC_API_KEY=...; clients read the same variable) or "
                "--api-key-file FILE, or pass --insecure on a trusted network")


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address or 'localhost' (0.0.0.0, '::' and names are not)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def authorized(header: str | None, key: str) -> bool:
    """Whether an Authorization header carries `key` as a bearer token, compared in constant time
    (the digests have equal length whatever was sent)."""
    scheme, _, token = (header or "").partition(" ")
    given = token.strip() if scheme.lower() == "bearer" else ""
    return hmac.compare_digest(hashlib.sha256(given.encode("utf-8", "surrogateescape")).digest(),
                               hashlib.sha256(key.encode("utf-8")).digest()) and bool(given)


def build_app(rm: RewardModel, cfg: ServeConfig | None = None):
    """The FastAPI app around one RewardModel (loaded at startup, drained at shutdown)."""
    from fastapi import FastAPI, Request

    cfg = cfg or ServeConfig()
    counters = {"requests": 0, "rejected_full": 0, "rejected_size": 0, "timeouts": 0, "bad_requests": 0,
                "unauthorized": 0}

    def refuse(counter: str, status: int, msg: str, **headers):
        """The error response `status` with `msg`, counted under `counter`."""
        from fastapi.responses import JSONResponse

        counters[counter] += 1
        return JSONResponse({"error": msg}, status_code=status, headers=headers or None)

    @asynccontextmanager
    async def lifespan(app):
        await asyncio.to_thread(rm.load)
        log.info("verifier loaded: %s", rm.engine_options.get("model"))
        yield
        await asyncio.to_thread(rm.close)  # the queue is drained before the process exits

    app = FastAPI(title="adaptrubric reward service", lifespan=lifespan)

    if cfg.api_key is not None:
        @app.middleware("http")
        async def require_key(request: Request, call_next):  # before any body is read or anything scored
            if not authorized(request.headers.get("authorization"), cfg.api_key):
                return refuse("unauthorized", 401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                              **{"WWW-Authenticate": "Bearer"})
            return await call_next(request)

    async def read_json(request: Request):
        size = request.headers.get("content-length")
        if size is not None and size.isdigit() and int(size) > cfg.max_request_bytes:
            return None, refuse("rejected_size", 413, f"request body {size} bytes > limit {cfg.max_request_bytes}")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > cfg.max_request_bytes:
                return None, refuse("rejected_size", 413, f"request body > limit {cfg.max_request_bytes} bytes")
        try:
            return await asyncio.to_thread(json.loads, body), None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return None, refuse("bad_requests", 400, f"body is not JSON: {exc}")
        except RecursionError:
            return None, refuse("bad_requests", 400, "body is not usable JSON: nested too deeply")

    async def score_items(items: list) -> tuple[list[Verdict] | None, Any]:
        if len(items) > cfg.max_items:
            return None, refuse("rejected_size", 413, f"{len(items)} trajectories in one request > limit {cfg.max_items}")
        counters["requests"] += 1
        images = ImageStore(rm.config.max_image_pixels)  # this request's inline screenshots
        futs: list = []
        try:
            trajs, verdicts = await asyncio.to_thread(load_items, items, rm.config, images, True)
            try:
                futs = rm.submit([t for _, t in trajs]) if trajs else []
            except QueueFull as exc:
                return None, refuse("rejected_full", 503, f"busy: {exc}; retry later", **{"Retry-After": "1"})
            try:
                done = await asyncio.wait_for(asyncio.gather(*(asyncio.wrap_future(f) for f in futs),
                                                             return_exceptions=True), cfg.request_timeout_s)
            except asyncio.TimeoutError:
                return None, refuse("timeouts", 504, f"not scored within {cfg.request_timeout_s} s")
        finally:
            close_when_done(images, futs)
        for (i, t), v in zip(trajs, done):
            verdicts[i] = v if isinstance(v, Verdict) else Verdict(id=t.id, status="error", error=f"{type(v).__name__}: {v}")
        rm.count_verdicts(verdicts)  # the service scores through the model's own queue
        return verdicts, None

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": rm.engine_options.get("model"), "loaded": rm.loaded,
                "pending": rm.pending, "stats": {**rm.stats, **counters}}

    @app.get("/stats")
    async def stats():
        """The model's counts and, with a judge, the live agreement (`cascade`)."""
        return {**rm.stats, **counters}

    async def score_request(request: Request, key: str, expected: str):
        """The verdicts for the list `key` of the request's JSON body, or the error response."""
        body, err = await read_json(request)
        if err is not None:
            return None, err
        items = body.get(key) if isinstance(body, dict) else None
        if not isinstance(items, list):
            return None, refuse("bad_requests", 400, expected)
        return await score_items(items)

    @app.post("/score")
    async def score(request: Request):
        verdicts, err = await score_request(request, "trajectories", 'expected {"trajectories": [...]}')
        if err is not None:
            return err
        return {"verdicts": [v.to_dict() for v in verdicts], "rewards": [rm.value(v) for v in verdicts]}

    async def openrlhf(request: Request):
        verdicts, err = await score_request(request, "labels", 'expected {"query": [...], "prompts": [...], '
                                            '"labels": [...]} with a trajectory in each label (--data.label_key)')
        if err is not None:
            return err
        r = [rm.number(v) for v in verdicts]
        return {"rewards": r, "scores": r,
                "extra_logs": {"adaptrubric_unparsed": [float(v.status == "unparsed") for v in verdicts],
                               "adaptrubric_error": [float(v.status == "error") for v in verdicts]}}

    app.post("/openrlhf")(openrlhf)
    app.post("/get_reward")(openrlhf)
    app.state.counters = counters
    return app


def close_when_done(images: ImageStore, futs: list) -> None:
    """Delete a request's inline screenshots once the scoring thread is done with them (at once, or
    after the last future of a request that timed out: the callback that sees every future done)."""
    def close_if_all_done(_f=None) -> None:  # a second close is a no-op
        if all(x.done() for x in futs):
            images.close()

    close_if_all_done()
    for f in futs:  # a future done already calls back at once
        f.add_done_callback(close_if_all_done)


def serve(rm: RewardModel, cfg: ServeConfig | None = None) -> None:
    """Run the service until SIGTERM/SIGINT (then finish in-flight requests and the queue)."""
    import uvicorn

    cfg = cfg or ServeConfig()
    t0 = time.perf_counter()
    app = build_app(rm, cfg)
    log.info("starting on http://%s:%d (setup %.1f s)", cfg.host, cfg.port, time.perf_counter() - t0)
    uvicorn.run(app, host=cfg.host, port=cfg.port, log_level="warning",
                timeout_graceful_shutdown=int(cfg.graceful_timeout_s), access_log=False)

