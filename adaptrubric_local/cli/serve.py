"""The `serve` subcommand (registered into the main parser by `cli/` through `add_subcommands`).
Argument handling only; the service is rewards/serve.py, the verifier rewards/model.py.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import fields
from pathlib import Path

from ..dry_run import FakeEngine
from ..flags import Parser, add_config_arguments, common, config_kwargs, explicit
from ..pipeline import PipelineConfig
from ..rewards.config import RewardConfig, load_options
from ..rewards.model import RewardModel
from ..rewards.serve import ServeConfig
from .cascade import add_judge_arguments
from .common import FORMATTER, add_command, add_model_options, add_remote_options, check_engine_options

EXAMPLES = """examples:
  adaptrubric serve --model Qwen/Qwen3-VL-4B-Instruct --port 8000
  adaptrubric serve --config reward.yaml --max-images 6 --reward p_success   # flags override the file
  adaptrubric serve --model M --calibration calib.json --reward p_success    # calibrated soft reward
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


def read_key(args, opts: dict) -> str | None:
    """The API key: --api-key, else the file, else the (non-empty) environment variable named by api_key_env."""
    env = opts.get("api_key_env", RewardConfig.api_key_env)
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
    return (os.environ.get(env) or None) if env else None


# the reward options that only a client of the service uses
CLIENT_ONLY = ("service_url", "service_timeout", "inline_images")
SERVE_DEFAULTS = {"max_pending": 1024}  # a service bounds its queue (503 beyond it)


def cmd_serve(args) -> int:
    from ..rewards.serve import serve  # looked up at each call (tests replace it)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    opts = {**SERVE_DEFAULTS, **(load_options(args.config) if args.config else {})}
    service = {f.name for f in fields(ServeConfig)}  # every other config flag (add_arguments) is a verifier option
    opts.update({name: getattr(args, name) for name in sorted(explicit(args) - service)})
    if "trajectories_per_batch" not in opts and opts.get("max_batch_size"):  # as every command derives it
        opts["trajectories_per_batch"] = max(4 * opts["max_batch_size"], 8)
    if opts.get("service_url"):
        raise ValueError("the service cannot itself forward to service_url; remove it from the service's config")
    engine = opts.pop("engine", None)  # the in-process engine's name (a reward config's `engine:` key)
    check_engine_options(engine or "transformers", explicit(args))
    if args.fake_engine:
        engine = FakeEngine()
    cfg = ServeConfig(**{**config_kwargs(args, ServeConfig, skip=("api_key",)), "api_key": read_key(args, opts)})
    # the ServeConfig above refused an open address without a key
    rm = RewardModel.from_options(opts, where="serve", engine=engine)
    if cfg.api_key is None:
        logging.getLogger("adaptrubric.serve").warning("no API key: every client that reaches %s is served", cfg.host)
    serve(rm, cfg)
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of `serve`: the service's (ServeConfig), and every verifier option (reward, pipeline and
    engine configs: the keys of a reward.yaml), a flag given winning over --config."""
    common(p.add_argument("--config", help="YAML/JSON file of verifier options: the keys are the flags' names "
                                           "(every option of `score`, plus the reward options)"), "service")
    add_config_arguments(p.add_argument_group("service"), ServeConfig)
    p.add_argument("--api-key-file", metavar="FILE", help="read the API key from FILE (instead of the environment)")
    p.add_argument("--fake-engine", action="store_true",
                   help="scripted verifier, no model (to check the wiring of a training setup)")
    add_config_arguments(p.add_argument_group("rewards"), RewardConfig, skip=CLIENT_ONLY, hide_defaults=True,
                         defaults=SERVE_DEFAULTS)
    add_config_arguments(p.add_argument_group("AdaptRubric (defaults: the paper's method)"), PipelineConfig,
                         hide_defaults=True)
    add_model_options(p, serve=True)
    add_remote_options(p)
    add_judge_arguments(p, hide_defaults=True)  # /stats then holds the live agreement
    p.set_defaults(func=cmd_serve)


def add_subcommands(sub) -> None:
    add_arguments(add_command(sub, "serve", help="run the verifier as an HTTP reward service shared by rollout workers",
        description="One verifier shared by every rollout worker: concurrent requests are batched together (dynamic "
                    "batching), routes and cues are cached across clients, a full queue answers 503. Endpoints: GET "
                    "/health, POST /score, POST /openrlhf. With an API key every request needs 'Authorization: Bearer "
                    "<key>'.", epilog=EXAMPLES))


def main(argv=None) -> int:
    """`python -m adaptrubric_local.cli.serve` (the same flags as `adaptrubric serve`)."""
    ap = Parser(prog="adaptrubric serve", epilog=EXAMPLES, formatter_class=FORMATTER)
    add_arguments(ap)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
