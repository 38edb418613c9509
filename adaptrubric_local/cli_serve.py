"""The `serve` subcommand (registered into the main parser by `cli.py` through `add_subcommands`).
Argument handling only; the service is serve.py, the verifier reward_model.py.
"""
from __future__ import annotations

import argparse
import logging
from typing import Any

from .cli_common import add_remote_options

EXAMPLES = """examples:
  adaptrubric serve --model Qwen/Qwen3-VL-4B-Instruct --port 8000
  adaptrubric serve --config reward.yaml --set max_images=6 --set reward=p_success
  adaptrubric serve --model M --calibration calib.json --set reward=p_success   # calibrated soft reward
  adaptrubric serve --openai-url http://vllm-host:8000/v1 --model Qwen/Qwen3-VL-8B-Instruct   # verifier on vLLM
  CUDA_VISIBLE_DEVICES=1 adaptrubric serve --config reward.yaml --port 8001   # one service per GPU

  # other machines: a key from the environment (not the command line, which `ps` shows to everyone)
  export ADAPTRUBRIC_API_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')
  adaptrubric serve --config reward.yaml --host 0.0.0.0 --port 8000

  curl -s 127.0.0.1:8000/health -H "Authorization: Bearer $ADAPTRUBRIC_API_KEY"
  curl -s 127.0.0.1:8000/score -H "Authorization: Bearer $ADAPTRUBRIC_API_KEY" \\
      -d '{"trajectories": [{"id": "a", "instruction": "...",
           "steps": [{"screenshot": "data:image/png;base64,...", "action": "..."}]}]}'

then point the trainers at it: service_url: http://HOST:8000 in the file named by $ADAPTRUBRIC_CONFIG
(or $ADAPTRUBRIC_SERVICE_URL), the same $ADAPTRUBRIC_API_KEY in their environment, and inline_images: true
when the trainers' screenshots are not on this machine. OpenRLHF's HTTP route
(--reward.remote_url http://HOST:8000/openrlhf) sends no key: use it only without one.
"""


def read_key(args) -> "str | None":
    """The API key: --api-key, else the file, else the environment variable (empty counts as none)."""
    import os
    from pathlib import Path

    if args.api_key:
        return args.api_key
    if args.api_key_file:
        path = Path(args.api_key_file)
        if not path.is_file():
            raise FileNotFoundError(f"--api-key-file: no such file: {path}")
        key = path.read_text(encoding="utf-8").strip()
        if not key:
            raise ValueError(f"--api-key-file: {path} is empty")
        return key
    return (os.environ.get(args.api_key_env) or None) if args.api_key_env else None


def _value(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """`key=value` overrides (values read as YAML: 6, true, null, [a, b])."""
    out = {}
    for p in pairs:
        if "=" not in p:
            raise ValueError(f"--set expects key=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k.strip()] = _value(v)
    return out


def cmd_serve(args) -> int:
    from .engine.remote import RemoteConfig
    from .flags import config_kwargs
    from .reward_model import RewardModel
    from .serve import ServeConfig, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    opts = parse_sets(args.set)
    if args.model:
        opts["model"] = args.model
    opts.update(config_kwargs(args, RemoteConfig, only_given=True))
    if args.calibration:
        opts["calibration"] = args.calibration
    opts.setdefault("max_pending", args.max_queue)
    opts.setdefault("batch_window_ms", args.batch_window_ms)
    opts.setdefault("max_batch", args.max_batch)
    engine = None
    if args.fake_engine:
        from .dry_run import FakeEngine

        engine = FakeEngine()
    cfg = ServeConfig(host=args.host, port=args.port, max_request_bytes=int(args.max_request_mb * (1 << 20)),
                      max_items=args.max_items, request_timeout_s=args.request_timeout, api_key=read_key(args),
                      insecure=args.insecure)  # refuses an open address without a key before anything loads
    rm = (RewardModel.from_config(args.config, engine=engine, **opts) if args.config
          else RewardModel(engine=engine, **opts))
    if rm.config.service_url:
        raise ValueError("the service cannot itself forward to service_url; remove it from the service's config")
    if cfg.api_key is None:
        logging.getLogger("adaptrubric.serve").warning("no API key: every client that reaches %s is served", cfg.host)
    serve(rm, cfg)
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of `serve`."""
    p.add_argument("--config", help="YAML/JSON file of verifier options (every option of `score`, plus reward, "
                                    "unparsed_reward, data_root, image_roots)")
    p.add_argument("--model", help="Qwen3-VL checkpoint (hub id or folder); default the engine's default. With "
                                   "--openai-url: the served model name")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one option of the config (repeatable), e.g. --set max_images=6")
    p.add_argument("--calibration", metavar="CALIB.json",
                   help="a file from `adaptrubric calibrate`: verdicts carry p_success_calibrated (the p_success "
                        "reward uses it); its sha256 is shown by GET /health")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1); any other address needs an API key or --insecure")
    p.add_argument("--api-key-env", default="ADAPTRUBRIC_API_KEY", metavar="VAR",
                   help="environment variable holding the API key clients must send as a bearer token "
                        "(default ADAPTRUBRIC_API_KEY; unset or empty: no key)")
    p.add_argument("--api-key-file", metavar="FILE", help="read the API key from FILE instead")
    p.add_argument("--api-key", metavar="KEY",
                   help="the API key itself (visible in `ps` and shell history: prefer the environment or a file)")
    p.add_argument("--insecure", action="store_true",
                   help="serve a non-loopback address without an API key (only on a network you trust)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--max-batch", type=int, default=32, help="most trajectories per engine batch (default 32)")
    p.add_argument("--batch-window-ms", type=float, default=50.0,
                   help="wait this long for more requests before running a batch (default 50)")
    p.add_argument("--max-queue", type=int, default=1024,
                   help="most trajectories waiting; more are answered 503 (default 1024)")
    p.add_argument("--max-request-mb", type=float, default=8.0, help="largest request body in MiB (default 8)")
    p.add_argument("--max-items", type=int, default=256, help="most trajectories per request (default 256)")
    p.add_argument("--request-timeout", type=float, default=600.0, help="seconds a request may wait (default 600)")
    p.add_argument("--fake-engine", action="store_true",
                   help="scripted verifier, no model (to check the wiring of a training setup)")
    add_remote_options(p)
    p.set_defaults(func=cmd_serve)


def add_subcommands(sub) -> None:
    """Register `serve`."""
    p = sub.add_parser("serve", help="run the verifier as an HTTP reward service shared by rollout workers",
                       description="One verifier shared by every rollout worker: concurrent requests are batched "
                                   "together (dynamic batching), routes and cues are cached across clients, a full "
                                   "queue answers 503. Endpoints: GET /health, POST /score, POST /openrlhf. "
                                   "With an API key every request needs 'Authorization: Bearer <key>'.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)


def main(argv=None) -> int:
    """`python -m adaptrubric_local.cli_serve` (the same flags as `adaptrubric serve`)."""
    ap = argparse.ArgumentParser(prog="adaptrubric serve", epilog=EXAMPLES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    import sys

    sys.exit(main())
