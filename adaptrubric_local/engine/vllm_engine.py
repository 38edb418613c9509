"""The vLLM backend: Qwen3-VL in process through one `vllm.LLM`, seeing what the transformers engine
sees: the chat text from the same `Encoder` as token ids, every screenshot resized by the package's
image pipeline (`stats["prompt_token_mismatch"]` counts any request expanded otherwise).

Greedy unless `votes` > 1; watched tokens' log-probabilities are asked for by id at every position;
`stop_after_line` is honoured exactly, in rounds continued from the row's own token ids (never inside
an open `<think>`). `--adapter` runs through vLLM's LoRA where it supports the modules, else a merged
copy (`stats["adapter"]`). At most `2 * max_num_seqs` requests are in flight. Settings:
vllm_config.py; processes: vllm_processes.py. Knows nothing about rubrics, routing or verdicts.
"""
from __future__ import annotations

import json
import math
import shutil
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import takewhile
from pathlib import Path

from .base import Engine, Output, Request, TokenProbs, cut_after_line, length_reason, watched_offsets
from .vllm_config import INSTALL_HINT, VLLMEngineConfig, VLLMOptions, llm_kwargs, lora_unsupported  # noqa: F401
from .vllm_processes import start_llm, stop_llm

MAX_ROUNDS = 8  # stop rounds per row (each prefix line inside a thinking block costs one)


def cut_after_verdict_line(text: str, prefix: str, opened: bool = False) -> tuple[str | None, bool]:
    """(`base.cut_after_line`'s cut, whether its line is complete: ended by a newline rather than by the
    end of the text so far), or (None, False) when there is no such line."""
    cut = cut_after_line(text, prefix, opened)
    return cut, cut is not None and cut.endswith("\n")


@dataclass
class _Row:
    """One sample of one request while it generates, across stop rounds."""

    req: int
    sample: int
    ids: list = field(default_factory=list)
    logprobs: list = field(default_factory=list)  # per generated token: {token id: logprob} of the watched ids
    finished: str | None = None  # "eos" | "line" | "cap" | "context"
    rounds: int = 0
    prompt_tokens: int = 0
    text: str = ""
    cut: str | None = None  # the text up to the stop line (cut_after_verdict_line), once it has begun
    complete: bool = False  # that line has ended


class VLLMEngine(Engine):
    """Qwen3-VL through vLLM, in process (its engine core runs in a child process: a script that builds
    this engine must guard its code with `if __name__ == "__main__":`)."""

    def __init__(self, config: VLLMEngineConfig | None = None, llm=None, **overrides):
        """`llm`: a `vllm.LLM` already running (benchmarks, a second image setting on the same weights);
        otherwise one is started for `config` (its adapter, if any, merged or as LoRA)."""
        try:
            import vllm  # noqa: F401
        except ImportError:
            raise ImportError(INSTALL_HINT) from None
        from .encoding import Encoder
        from .images import pipeline_for
        from .loading import load_processor

        self.config = config or VLLMEngineConfig(**overrides)
        self.name = self.config.name
        self.processor = load_processor(self.config.model)
        self.encoder = Encoder(self.processor)
        self.tokenizer = self.encoder.tokenizer
        self.images = pipeline_for(self.processor, self.config)
        self._pool = ThreadPoolExecutor(max_workers=self.config.image_workers, thread_name_prefix="vllm-img")
        self.opens_thinking = self.encoder.opens_thinking()  # a Thinking template
        self.eos_ids = set(self.encoder.end_ids(self.tokenizer.eos_token_id))
        self.counts: Counter = Counter()
        self._tmp: str | None = None
        self.lora = None
        self.adapter_route = None
        weights = self._weights()
        self._processes: list = []  # the engine core and workers this engine started (vllm_processes.py)
        if llm is None:
            import torch

            rank = None if self.lora is None else int(json.loads(
                (Path(self.config.adapter) / "adapter_config.json").read_text()).get("r", 16))
            llm, self._processes = start_llm(llm_kwargs(self.config, weights, torch.cuda.is_available(), rank))
        self.llm = llm
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)

    # ------------------------------------------------------------------ loading
    def _weights(self) -> str:
        """The checkpoint vLLM loads: the model, or a merged copy of model + adapter."""
        cfg = self.config
        if not cfg.adapter:
            return cfg.model
        unsupported = lora_unsupported(cfg.adapter)
        mode = cfg.adapter_mode
        if mode == "lora" and unsupported:
            raise ValueError(f"{cfg.adapter}: vLLM's LoRA cannot load it ({unsupported}); use adapter_mode merged "
                             "(--adapter-mode merged) or auto")
        if mode == "lora" or (mode == "auto" and not unsupported):
            from vllm.lora.request import LoRARequest

            self.lora = LoRARequest("adapter", 1, str(Path(cfg.adapter).resolve()))
            self.adapter_route = "lora"
            return cfg.model
        from .loading import merge_adapter

        self._tmp = tempfile.mkdtemp(prefix="adaptrubric-merged-")
        merge_adapter(cfg.model, cfg.adapter, self._tmp, cfg.dtype)
        self.adapter_route = "merged" + (f" ({unsupported})" if unsupported else "")
        return self._tmp

    @property
    def stats(self) -> dict:
        """rows (requests), rounds (engine requests, stop rounds included), hit_cap, hit_context,
        stopped_at_line, errors, prompt_tokens, cached_prompt_tokens (served by the prefix cache),
        prompt_token_mismatch (requests whose prompt vLLM expanded to another length than planned),
        adapter (lora / merged / none), max_model_len."""
        keys = ("rows", "rounds", "hit_cap", "hit_context", "stopped_at_line", "errors", "prompt_tokens",
                "cached_prompt_tokens", "prompt_token_mismatch")
        return {**{k: self.counts[k] for k in keys}, "adapter": self.adapter_route or "none",
                "max_model_len": self.max_model_len}

    # ------------------------------------------------------------------ inputs
    def _inputs(self, req: Request, prefix: str = "") -> tuple[dict | None, int, int, str | None]:
        """(vLLM prompt with token ids and resized images, planned prompt tokens, visual tokens, error)."""
        from .images import resized_images

        try:
            sizes = self.images.plan(req.images)
            pics = resized_images(req.images, sizes)
        except Exception as exc:  # missing or unreadable file, absurd aspect ratio
            return None, 0, 0, f"cannot read image: {exc}"
        tokens = [self.images.cfg.tokens(size) for size in sizes]
        ids = self.tokenizer(self.encoder.chat_text(req) + prefix, add_special_tokens=False)["input_ids"]
        planned = len(ids) - len(sizes) + sum(tokens)
        prompt = {"prompt_token_ids": ids, **({"multi_modal_data": {"image": pics}} if pics else {})}
        return prompt, planned, sum(tokens), None

    def _too_long(self, planned: int, n_images: int) -> str | None:
        limit = self.config.image_limit
        if n_images > limit:
            return (f"{n_images} screenshots, more than limit_mm_per_prompt ({limit}) allows: raise "
                    "--limit-mm-per-prompt or lower --max-images")
        if planned >= self.max_model_len:
            return (f"prompt of {planned} tokens does not fit max_model_len ({self.max_model_len}): raise "
                    f"--max-model-len to at least {planned} + the reply cap, or lower --max-visual-tokens or "
                    "--max-images")
        return None

    # ------------------------------------------------------------------ generation
    def generate(self, requests: list[Request]) -> list[Output]:
        """One Output per Request, in order."""
        prepared = list(self._pool.map(self._inputs, requests))
        outputs: list[Output | None] = [None] * len(requests)
        rows: dict[int, list[_Row]] = {}  # per request, its samples
        jobs = []
        for i, (req, (prompt, planned, _, err)) in enumerate(zip(requests, prepared)):
            err = err or self._too_long(planned, len(req.images))
            if err:
                outputs[i] = Output(error=err, n_images=len(req.images))
                continue
            rows[i] = [_Row(req=i, sample=s) for s in range(self.config.votes)]
            jobs.append((rows[i], prompt, planned))
        failed = self._run(requests, jobs)
        for i, req in enumerate(requests):
            if i in failed:
                outputs[i] = Output(error=failed[i], n_images=len(req.images))
            elif outputs[i] is None:
                outputs[i] = self._output(req, rows[i], prepared[i][1], prepared[i][2])
        self.counts["errors"] += sum(o.error is not None for o in outputs)  # type: ignore[union-attr]
        return outputs  # type: ignore[return-value]

    def _params(self, req: Request, row_sample: int | None, done: int, planned: int, stop: list | None):
        """SamplingParams for a request's next round (`row_sample` None: the first round, all samples)."""
        from vllm import SamplingParams

        cap = req.cap(self.config.max_new_tokens)
        room = self.max_model_len - planned - done
        k = self.config.votes
        kw = dict(max_tokens=max(1, min(cap - done, room)), stop=stop, skip_special_tokens=True, temperature=0.0,
                  logprob_token_ids=[self._watch_id(w) for w in req.watch] or None)
        if k > 1:
            seed = self.config.sampling_seed + (0 if row_sample is None else 7919 * (row_sample + 1) + done)
            kw.update(temperature=self.config.temperature, top_p=1.0, top_k=0, seed=seed,
                      n=k if row_sample is None else 1)
        return SamplingParams(**kw)

    def _watch_id(self, token: str) -> int:
        return int(self.tokenizer.convert_tokens_to_ids(token))

    def _run(self, requests: list[Request], jobs: list) -> dict[int, str]:
        """Stream every job's rounds through the engine, at most 2 * max_num_seqs requests in flight; a
        first round vLLM refuses is that request's error (request index -> message), not the batch's."""
        engine = self.llm.llm_engine
        window = 2 * self.config.max_num_seqs
        pending = list(jobs)  # (rows, prompt, planned) for first rounds, (row, prompt, planned) for later ones
        live: dict[str, tuple] = {}
        failed: dict[int, str] = {}
        while pending or live:
            while pending and len(live) < window:
                target, prompt, planned = job = pending.pop(0)
                first = isinstance(target, list)
                row = target[0] if first else target
                req = requests[row.req]
                params = self._params(req, None if first else row.sample, len(row.ids), planned, self._stop(req, row))
                feed = prompt if first else {**prompt, "prompt_token_ids": prompt["prompt_token_ids"] + row.ids}
                try:
                    (rid,) = self.llm.enqueue([feed], [params], lora_request=self.lora, use_tqdm=False)
                except (ValueError, TypeError) as exc:  # vLLM's validation of one request
                    failed[row.req] = f"vLLM refused the request: {exc}"
                    continue
                live[_external_id(rid)] = job
                self.counts["rounds"] += 1
            if not live:
                break
            if not engine.has_unfinished_requests():  # never wait on an engine with nothing to do
                raise RuntimeError(f"vLLM finished with {len(live)} request(s) unanswered")
            for out in engine.step():
                key = _external_id(out.request_id)
                if not out.finished or key not in live:
                    continue
                target, prompt, planned = live.pop(key)
                if any(c.finish_reason == "abort" for c in out.outputs):  # never a verdict made of a cut reply
                    raise RuntimeError("vLLM aborted the requests in flight: its engine core is stopping (a signal "
                                       "reached it, as Ctrl-C in a terminal does)")
                rows = target if isinstance(target, list) else [target]
                if isinstance(target, list):
                    got = len(out.prompt_token_ids or [])
                    self.counts["prompt_tokens"] += got
                    self.counts["cached_prompt_tokens"] += int(getattr(out, "num_cached_tokens", 0) or 0)
                    self.counts["prompt_token_mismatch"] += got != planned
                    for row in rows:
                        row.prompt_tokens = got
                for row, comp in zip(rows, out.outputs):
                    if self._advance(requests[row.req], row, comp, planned):
                        pending.append((row, prompt, planned))
        return failed

    def _stop(self, req: Request, row: _Row) -> list | None:
        """This round's stop strings: the start of a line beginning with the prefix, or, once such a
        line has begun outside thinking, its end."""
        if not req.stop_after_line or row.rounds >= MAX_ROUNDS:
            return None
        if row.cut is not None and not row.complete:
            return ["\n"]
        return ["\n" + req.stop_after_line]

    def _advance(self, req: Request, row: _Row, comp, planned: int) -> bool:
        """Take one round's completion into the row; True when the row needs another round."""
        row.rounds += 1
        ids = list(comp.token_ids)
        lps = list(comp.logprobs or [{}] * len(ids))
        if comp.finish_reason == "stop" and comp.stop_reason is None and ids and ids[-1] in self.eos_ids:
            ids, lps = ids[:-1], lps[:-1]  # the end token is not text, nor counted (as in transformers)
        row.ids += ids
        row.logprobs += lps
        row.text = self.tokenizer.decode(row.ids, skip_special_tokens=True)
        if req.stop_after_line:
            row.cut, row.complete = cut_after_verdict_line(row.text, req.stop_after_line, self.opens_thinking)
        if row.complete:
            row.finished = "line"
        elif comp.finish_reason == "length":
            row.finished = length_reason(len(row.ids), req.cap(self.config.max_new_tokens))
        elif comp.finish_reason == "stop" and isinstance(comp.stop_reason, str) and row.rounds < MAX_ROUNDS:
            return True  # a stop string: the line has begun (or the prefix was inside thinking)
        else:
            row.finished = "eos"
        return False

    def _output(self, req: Request, rows: list[_Row], planned: int, visual: int) -> Output:
        texts = [r.cut or r.text for r in rows]  # text after the line (in the token ending it) is not the answer's
        samples = [(text, self._probs(r, req.watch, len(text))) for r, text in zip(rows, texts)]
        ended = {r.finished for r in rows}
        hit_cap, hit_context = "cap" in ended, "context" in ended
        self.counts.update(rows=1, hit_cap=int(hit_cap), hit_context=int(hit_context),
                           stopped_at_line=int("line" in ended))
        return Output(text=samples[0][0], prompt_tokens=rows[0].prompt_tokens or planned,
                      completion_tokens=sum(len(r.ids) for r in rows), token_probs=samples[0][1],
                      n_images=len(req.images), visual_tokens=visual, hit_cap=hit_cap, hit_context=hit_context,
                      samples=samples if len(rows) > 1 else [], opened_thinking=self.opens_thinking)

    def _probs(self, row: _Row, watch: tuple[str, ...], length: int) -> list[TokenProbs]:
        """The watched tokens' probabilities at each position where one was generated (within the text)."""
        if not watch:
            return []
        ids = {self._watch_id(w): w for w in watch}
        found = takewhile(lambda at: at[1] < length, watched_offsets(self.tokenizer, row.ids[:len(row.logprobs)], ids))
        return [TokenProbs(offset=offset, probs={w: _prob(row.logprobs[j].get(i)) for i, w in ids.items()})
                for j, offset in found if row.logprobs[j]]

    def next_token_probs(self, requests, prefixes, candidates=("0", "1")):
        """P(next token = c) for each candidate after each request and assistant prefix."""
        from vllm import SamplingParams

        ids = {c: self._watch_id(c) for c in candidates}
        prompts = []
        for r, prefix in zip(requests, prefixes):
            prompt, planned, _, err = self._inputs(r, prefix)
            err = err or self._too_long(planned + 1, len(r.images))
            if err:
                raise ValueError(f"request {r.tag or len(prompts)}: {err}")
            prompts.append(prompt)
        params = SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=list(ids.values()))
        outs = self.llm.generate(prompts, params, lora_request=self.lora, use_tqdm=False)
        return [{c: _prob(o.outputs[0].logprobs[0].get(i)) for c, i in ids.items()} for o in outs]

    def close(self) -> None:
        """Stop vLLM's engine core and worker processes (vllm_processes.stop_llm); remove a merged copy."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            stop_llm(llm, getattr(self, "_processes", ()))
            self._processes = []
            del llm
        self.images.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def _external_id(request_id: str) -> str:
    """The id a request was added under: vLLM hands back its internal id ("7-1a2b3c4d", the caller's id and a
    random suffix) while outputs carry the caller's ("7")."""
    head, sep, tail = request_id.rpartition("-")
    return head if sep and len(tail) == 8 and head else request_id


def _prob(entry) -> float:
    """The probability of a vLLM Logprob (or a bare log-probability); 0 when missing."""
    return 0.0 if entry is None else math.exp(float(getattr(entry, "logprob", entry)))
