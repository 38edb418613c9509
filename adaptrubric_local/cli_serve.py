"""The `serve` subcommand (registered into the main parser by `cli.py` through `add_subcommands`).
Argument handling only; the service is serve.py, the verifier reward_model.py.
"""
from __future__ import annotations

import argparse
import logging
from typing import Any

EXAMPLES = """examples:
  adaptrubric serve --model Qwen/Qwen3-VL-4B-Instruct --port 8000
  adaptrubric serve --config reward.yaml --set max_images=6 --set reward=p_success
  CUDA_VISIBLE_DEVICES=1 adaptrubric serve --config reward.yaml --port 8001   # one service per GPU

  curl -s 127.0.0.1:8000/health
  curl -s 127.0.0.1:8000/score -d '{"trajectories": [{"id": "a", "instruction": "...", "steps": [...]}]}'

then point the trainers at it: service_url: http://HOST:8000 in the file named by $ADAPTRUBRIC_CONFIG
(or $ADAPTRUBRIC_SERVICE_URL); OpenRLHF's remote route: --reward.remote_url http://HOST:8000/openrlhf
"""


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
    from .reward_model import RewardModel
    from .serve import ServeConfig, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    opts = parse_sets(args.set)
    if args.model:
        opts["model"] = args.model
    opts.setdefault("max_pending", args.max_queue)
    opts.setdefault("batch_window_ms", args.batch_window_ms)
    opts.setdefault("max_batch", args.max_batch)
    engine = None
    if args.fake_engine:
        from .dry_run import FakeEngine

        engine = FakeEngine()
    rm = (RewardModel.from_config(args.config, engine=engine, **opts) if args.config
          else RewardModel(engine=engine, **opts))
    if rm.config.service_url:
        raise ValueError("the service cannot itself forward to service_url; remove it from the service's config")
    serve(rm, ServeConfig(host=args.host, port=args.port, max_request_bytes=int(args.max_request_mb * (1 << 20)),
                          max_items=args.max_items, request_timeout_s=args.request_timeout))
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of `serve`."""
    p.add_argument("--config", help="YAML/JSON file of verifier options (every option of `score`, plus reward, "
                                    "unparsed_reward, data_root, image_roots)")
    p.add_argument("--model", help="Qwen3-VL checkpoint (hub id or folder); default the engine's default")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one option of the config (repeatable), e.g. --set max_images=6")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
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
    p.set_defaults(func=cmd_serve)


def add_subcommands(sub) -> None:
    """Register `serve`."""
    p = sub.add_parser("serve", help="run the verifier as an HTTP reward service shared by rollout workers",
                       description="One verifier shared by every rollout worker: concurrent requests are batched "
                                   "together (dynamic batching), routes and cues are cached across clients, a full "
                                   "queue answers 503. Endpoints: GET /health, POST /score, POST /openrlhf.",
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
