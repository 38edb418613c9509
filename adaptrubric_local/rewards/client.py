"""The client side of `adaptrubric serve`: a RewardModel with `service_url` set sends its trajectories
there instead of loading a model. Knows nothing about models or RL frameworks.
"""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import Any

from ..types import Trajectory, Verdict
from .config import RewardConfig
from .images import data_url, is_inline
from .inputs import item_error, resolve_shot, to_trajectory


class ServiceClient:
    """Sends trajectories to `adaptrubric serve`. With several URLs, a trajectory goes to the replica
    chosen by its instruction, so a GRPO group shares one replica's route/cue cache. The API key, read
    from the environment variable `api_key_env`, goes as a bearer token with every request. With
    `inline_images` the screenshots travel inside the request (data URLs); otherwise as absolute paths
    that the service must be able to read (a shared file system). Bytes travel inline either way."""

    def __init__(self, cfg: RewardConfig):
        self.urls = [u.strip().rstrip("/") for u in (cfg.service_url or "").split(",") if u.strip()]
        if not self.urls:
            raise ValueError("service_url is empty")
        self.timeout = cfg.service_timeout
        self.inline = cfg.inline_images
        key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"

    def _payload(self, obj: Any, cfg: RewardConfig, where: str) -> Any:
        """The item as sent: with `inline` every screenshot read here and sent as a data URL; otherwise
        relative paths made absolute (the service runs elsewhere) and bytes as data URLs."""
        if self.inline:
            if isinstance(obj, (bytes, bytearray)):
                obj = obj.decode("utf-8")
            if isinstance(obj, str) and obj.lstrip().startswith("{"):
                obj = json.loads(obj)
            if not isinstance(obj, (dict, Trajectory)):  # a path to trajectory data: load it here, where the files are
                obj = to_trajectory(obj, cfg, where)
        if isinstance(obj, Trajectory):
            obj = obj.to_dict()
        if isinstance(obj, (str, Path)) and not str(obj).lstrip().startswith("{") and not os.path.isabs(str(obj)):
            return str(cfg.root / obj)
        if not isinstance(obj, dict) or not isinstance(obj.get("steps"), list):
            return obj  # the service names the problem
        roots = [cfg.root, *map(Path, cfg.image_roots)]
        out = []
        for i, s in enumerate(obj["steps"]):
            shot = s.get("screenshot") if isinstance(s, dict) else None
            if is_inline(shot):  # bytes cannot travel in JSON as they are (a data URL stays as it is)
                s = {**s, "screenshot": data_url(shot)}
            elif isinstance(shot, str) and self.inline:
                s = {**s, "screenshot": data_url(resolve_shot(shot, roots, f"{where}, steps[{i}].screenshot"))}
            elif isinstance(shot, str) and not os.path.isabs(shot):
                s = {**s, "screenshot": str(cfg.root / shot)}
            out.append(s)
        return {**obj, "steps": out}

    @staticmethod
    def _instruction(obj: Any) -> str:
        if isinstance(obj, Trajectory):
            return obj.instruction
        return str(obj.get("instruction", "")) if isinstance(obj, dict) else str(obj)

    def post(self, url: str, body: dict) -> dict:
        """POST JSON, return JSON; a 503 (queue full) is retried with back-off."""
        data = json.dumps(body).encode("utf-8")
        delay = 0.2
        deadline = time.monotonic() + self.timeout
        while True:
            req = urllib.request.Request(url, data=data, headers=self._headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                if exc.code == 503 and time.monotonic() + delay < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                detail = exc.read().decode("utf-8", "replace")[:500]
                hint = {401: " (set the service's key in the environment variable named by api_key_env)",
                        413: " (inline screenshots count: raise the service's --max-request-bytes)"}.get(exc.code, "")
                raise RuntimeError(f"reward service {url} answered {exc.code}: {detail}{hint}") from None
            except urllib.error.URLError as exc:
                raise RuntimeError(f"reward service {url} unreachable: {exc.reason}") from None

    def score(self, items: list[Any], cfg: RewardConfig) -> list[Verdict]:
        """Verdicts from the service, in order (requests to different replicas run one after another);
        an item that cannot be sent (a screenshot missing here) is an error verdict of its own."""
        out: list[Verdict | None] = [None] * len(items)
        by_url: dict[int, list[tuple[int, Any]]] = {}
        for i, obj in enumerate(items):
            try:
                payload = self._payload(obj, cfg, f"item {i}")
            except (ValueError, OSError, TypeError) as exc:
                out[i] = item_error(obj, i, str(exc))
                continue
            by_url.setdefault(zlib.crc32(self._instruction(obj).encode()) % len(self.urls), []).append((i, payload))
        for u, batch in by_url.items():
            res = self.post(self.urls[u] + "/score", {"trajectories": [p for _, p in batch]})
            for (i, _), d in zip(batch, res["verdicts"]):
                out[i] = Verdict.from_dict(d)
        return out  # type: ignore[return-value]
