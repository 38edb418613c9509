"""The reward service: one verifier per GPU shared by every rollout worker (`adaptrubric serve`).

FastAPI on uvicorn. Requests from concurrent clients go into the RewardModel's scoring thread, which
gathers what arrives within a short window into one engine batch (dynamic batching) and shares the
route/cue cache across clients. Limits: a bounded queue (`max_pending` trajectories; more get 503
with Retry-After), a request size cap (413), a cap on trajectories per request (413) and a time
limit per request (504). SIGTERM/Ctrl-C stops accepting, lets in-flight requests finish, then drains
the queue before exiting.

Endpoints:
  GET  /health                 {"status", "model", "loaded", "pending", "stats"}
  POST /score                  {"trajectories": [record | JSON | path, ...]} -> {"verdicts", "rewards"}
  POST /openrlhf, /get_reward  OpenRLHF's remote reward convention {"query", "prompts", "labels"} ->
                               {"rewards", "scores", "extra_logs"}; each label carries a trajectory

Several GPUs: one service per GPU (`CUDA_VISIBLE_DEVICES=i adaptrubric serve --port 800i`) and a
comma-separated `service_url`; clients send each instruction to one replica, so its cache stays warm.
Knows nothing about RL frameworks.
"""
# no `from __future__ import annotations`: FastAPI reads the handlers' annotations as objects

import asyncio
import json
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Optional

from .reward_model import QueueFull, RewardModel, to_trajectory
from .types import Verdict

log = logging.getLogger("adaptrubric.serve")


@dataclass
class ServeConfig:
    """Where the service listens and what it refuses."""

    host: str = field(default="127.0.0.1", metadata={"help": "address to bind (0.0.0.0 to serve other hosts)"})
    port: int = field(default=8000, metadata={"help": "TCP port"})
    max_request_bytes: int = field(default=8 << 20, metadata={"help": "largest request body accepted (413 above)"})
    max_items: int = field(default=256, metadata={"help": "most trajectories in one request (413 above)"})
    request_timeout_s: float = field(default=600.0, metadata={"help": "a request waits at most this long (504)"})
    graceful_timeout_s: float = field(default=120.0, metadata={"help": "on shutdown, wait this long for requests"})

    def __post_init__(self):
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be 1-65535, got {self.port}")
        if self.max_request_bytes < 1 or self.max_items < 1 or self.request_timeout_s <= 0:
            raise ValueError("max_request_bytes, max_items and request_timeout_s must be positive")


def _error(status: int, msg: str, **headers):
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": msg}, status_code=status, headers=headers or None)


def build_app(rm: RewardModel, cfg: Optional[ServeConfig] = None):
    """The FastAPI app around one RewardModel (loaded at startup, drained at shutdown)."""
    from fastapi import FastAPI, Request

    cfg = cfg or ServeConfig()
    counters = {"requests": 0, "rejected_full": 0, "rejected_size": 0, "timeouts": 0, "bad_requests": 0}

    @asynccontextmanager
    async def lifespan(app):
        await asyncio.to_thread(rm.load)
        log.info("verifier loaded: %s", rm.engine_options.get("model"))
        yield
        await asyncio.to_thread(rm.close)  # the queue is drained before the process exits

    app = FastAPI(title="adaptrubric reward service", lifespan=lifespan)

    async def read_json(request: Request):
        size = request.headers.get("content-length")
        if size is not None and size.isdigit() and int(size) > cfg.max_request_bytes:
            counters["rejected_size"] += 1
            return None, _error(413, f"request body {size} bytes > limit {cfg.max_request_bytes}")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > cfg.max_request_bytes:
                counters["rejected_size"] += 1
                return None, _error(413, f"request body > limit {cfg.max_request_bytes} bytes")
        try:
            return json.loads(body), None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            counters["bad_requests"] += 1
            return None, _error(400, f"body is not JSON: {exc}")

    async def score_items(items: list) -> tuple[Optional[list[Verdict]], Any]:
        if len(items) > cfg.max_items:
            counters["rejected_size"] += 1
            return None, _error(413, f"{len(items)} trajectories in one request > limit {cfg.max_items}")
        counters["requests"] += 1
        trajs, verdicts = [], [None] * len(items)
        for i, obj in enumerate(items):
            try:
                trajs.append((i, to_trajectory(obj, rm.config, f"item {i}")))
            except Exception as exc:  # one bad item must not sink the request
                verdicts[i] = Verdict(status="error", error=str(exc))
        try:
            futs = rm.submit([t for _, t in trajs]) if trajs else []
        except QueueFull as exc:
            counters["rejected_full"] += 1
            return None, _error(503, f"busy: {exc}; retry later", **{"Retry-After": "1"})
        try:
            done = await asyncio.wait_for(asyncio.gather(*(asyncio.wrap_future(f) for f in futs),
                                                         return_exceptions=True), cfg.request_timeout_s)
        except asyncio.TimeoutError:
            counters["timeouts"] += 1
            return None, _error(504, f"not scored within {cfg.request_timeout_s} s")
        for (i, t), v in zip(trajs, done):
            verdicts[i] = v if isinstance(v, Verdict) else Verdict(id=t.id, status="error", error=f"{type(v).__name__}: {v}")
        rm._count(verdicts)  # noqa: SLF001 - the service scores through the model's own queue
        return verdicts, None

    @app.get("/health")
    async def health():
        b = rm._batcher  # noqa: SLF001
        return {"status": "ok", "model": rm.engine_options.get("model"), "loaded": rm._pipe is not None,  # noqa: SLF001
                "pending": b.pending if b else 0, "stats": {**rm.stats, **counters}}

    @app.post("/score")
    async def score(request: Request):
        body, err = await read_json(request)
        if err is not None:
            return err
        items = body.get("trajectories") if isinstance(body, dict) else None
        if not isinstance(items, list):
            counters["bad_requests"] += 1
            return _error(400, 'expected {"trajectories": [...]}')
        verdicts, err = await score_items(items)
        if err is not None:
            return err
        return {"verdicts": [v.to_dict() for v in verdicts], "rewards": [rm.value(v) for v in verdicts]}

    async def openrlhf(request: Request):
        body, err = await read_json(request)
        if err is not None:
            return err
        labels = body.get("labels") if isinstance(body, dict) else None
        if not isinstance(labels, list):
            counters["bad_requests"] += 1
            return _error(400, 'expected {"query": [...], "prompts": [...], "labels": [...]} with a trajectory '
                               "in each label (--data.label_key)")
        verdicts, err = await score_items(labels)
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


def serve(rm: RewardModel, cfg: Optional[ServeConfig] = None) -> None:
    """Run the service until SIGTERM/SIGINT (then finish in-flight requests and the queue)."""
    import uvicorn

    cfg = cfg or ServeConfig()
    t0 = time.perf_counter()
    app = build_app(rm, cfg)
    log.info("starting on http://%s:%d (setup %.1f s)", cfg.host, cfg.port, time.perf_counter() - t0)
    uvicorn.run(app, host=cfg.host, port=cfg.port, log_level="warning",
                timeout_graceful_shutdown=int(cfg.graceful_timeout_s), access_log=False)

