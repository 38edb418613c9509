"""The transformers backend: Qwen3-VL in-process, batched, on one GPU (or the CPU).

Requests are sorted by length and grouped under a batch size, a padded-token budget (`budget.py`)
and, on a GPU, the memory model (`memory.py`); the next group's images decode while the current one
generates, and an out-of-memory error retries the group in halves, so every request gets its output.
Greedy unless `votes > 1`; `stop_after_line` and watched tokens through `generation.py`; `stats` and
`generate_iter` as docs/engines.md says. Knows nothing about rubrics, routing or verdicts.
"""
from __future__ import annotations

import gc
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from itertools import accumulate

import torch
from transformers import LogitsProcessorList, StoppingCriteriaList

from . import memory
from .base import Engine, Output, Request, TokenProbs, cut_after_line, watched_offsets
from .budget import TokenBudget
from .encoding import Encoder
from .hf_config import CPU_BATCH_TOKENS, DEFAULT_MODEL, HFEngineConfig  # noqa: F401 (re-exported)
from .generation import OutOfMemory, RowStop, WatchRecorder, is_oom, newline_table
from .images import BatchImages, pipeline_for, plan_tokens
from .loading import load_model

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # we use our own threads; avoid fork warnings

class HFEngine(Engine):
    """Qwen3-VL through transformers, in-process."""

    def __init__(self, config: HFEngineConfig | None = None, loaded: tuple | None = None, **overrides):
        """`loaded` = (model, processor) already in memory (benchmarks, a served model); otherwise
        `load_model(config)`."""
        self.config = config or HFEngineConfig(**overrides)
        self.name = self.config.name
        self.model, self.processor = loaded if loaded is not None else load_model(self.config)
        self.encoder = Encoder(self.processor, self.model.config.image_token_id, self.model.config.video_token_id)
        self.tokenizer = self.encoder.tokenizer
        self.device = next(self.model.parameters()).device
        self.images = pipeline_for(self.processor, self.config, pin_memory=self.device.type == "cuda")
        self.eos_ids = self.encoder.end_ids(self.model.generation_config.eos_token_id)
        self.pixel_dtype = next((p.dtype for n, p in self.model.named_parameters()
                                 if ".visual." in f".{n}" and p.is_floating_point()), torch.float32)
        self.sizes = memory.Sizes.of(self.model.config)
        text_config = getattr(self.model.config, "text_config", self.model.config)
        self.attn = (getattr(text_config, "_attn_implementation", None)  # the language model's: what memory.py counts
                     or getattr(self.model.config, "_attn_implementation", None) or "sdpa")
        self.memory_budget: float | None = None  # bytes a group's estimated peak may reach (GPU only)
        self.budget = TokenBudget(self.config.max_batch_tokens or self._derive_batch_tokens())
        self._newline: torch.Tensor | None = None
        self.opens_thinking = self.encoder.opens_thinking()
        self.inject_oom: Callable[[int], bool] | None = None  # test hook: rows -> raise OOM (inputs built)?
        self.counts: Counter = Counter()

    @property
    def max_batch_tokens(self) -> int:
        """The padded-token budget of a group now (lowered by out-of-memory errors, see budget.py)."""
        return self.budget.current

    @property
    def stats(self) -> dict:
        """groups (generate calls), rows (requests in them), rows_per_group, oom_splits (groups halved),
        failed_attempts (attempts that ran out of memory), hit_cap (rows cut by max_new_tokens),
        stopped_at_line (rows ended by stop_after_line), max_batch_tokens (the budget now),
        start_batch_tokens, budget_changes (each change: group, from, to, why), memory_budget_gib (GPU:
        what a group's estimated peak may reach), peak_estimate_gib (the memory model's estimate of the
        largest group that ran, over the weights), attn_implementation, tokenize_s (seconds tokenizing
        prompts), prepare_wait_s (seconds waiting for a group's images), generate_s."""
        c = self.counts
        return {"groups": c["groups"], "rows": c["rows"],
                "rows_per_group": c["rows"] / c["groups"] if c["groups"] else 0.0,
                "oom_splits": c["oom_splits"], "hit_cap": c["hit_cap"], "stopped_at_line": c["stopped_at_line"],
                **self.budget.stats,
                "memory_budget_gib": round(self.memory_budget / memory.GiB, 2) if self.memory_budget else None,
                "peak_estimate_gib": round(c["peak_estimate"] / memory.GiB, 3),
                "attn_implementation": self.attn,
                **{f"{k}_s": round(c[f"{k}_us"] / 1e6, 3) for k in ("tokenize", "prepare_wait", "generate")}}

    def _dtype_bytes(self) -> int:
        dtype = next(p.dtype for p in self.model.parameters() if p.is_floating_point())
        return 2 if dtype in (torch.bfloat16, torch.float16) else 4

    def _derive_batch_tokens(self) -> int:
        """On a GPU, the padded tokens that fit the free memory's share (`memory_budget`) at the model's
        per-token cost; on the CPU a fixed budget."""
        if self.device.type != "cuda":
            return CPU_BATCH_TOKENS
        free, _ = torch.cuda.mem_get_info(self.device)
        self.memory_budget = memory.free_budget(free)
        return memory.tokens_bound(self.sizes, self.attn, self._dtype_bytes(), self.memory_budget)

    # ------------------------------------------------------------------ prompt assembly (engine/encoding.py)
    def encode(self, reqs: list[Request], imgs: BatchImages, prefixes: list[str] | None = None,
               device=None) -> dict:
        """Model inputs for a batch, exactly as the Qwen3-VL processor would build them (float32
        pixels on the CPU when `device` is None; the engine's own path passes its device)."""
        rows = self.encoder.prompt_ids(reqs, imgs.tokens_per_image, prefixes)
        return self.encoder.collate(rows, imgs, device, self.pixel_dtype)

    def _shape(self, req: Request, planned: list[int] | None) -> tuple[int, int, int]:
        """(prompt tokens, visual tokens, new tokens) of a request, by the same estimate."""
        visual = sum(planned or [])
        return len(req.prompt + req.suffix) // 3 + visual, visual, req.cap(self.config.max_new_tokens)

    def _estimate(self, req: Request, planned: list[int] | None) -> int:
        """Padded tokens a request costs (`_shape`'s prompt and new tokens), times the samples drawn."""
        prompt, _, new = self._shape(req, planned)
        return (prompt + new) * self.config.votes

    # ------------------------------------------------------------------ batching
    def _group(self, remaining: list[int], est: dict[int, int], shape: dict[int, tuple[int, int, int]]) -> list[int]:
        """The next group: from the front of `remaining` (longest first), under the batch size, the
        padded-token budget and, on a GPU, the memory model's estimate of its peak."""
        cur: list[int] = []
        longest = 0
        for i in remaining:
            new_longest = max(longest, est[i])
            if cur and (len(cur) >= self.config.max_batch_size or new_longest * (len(cur) + 1) > self.max_batch_tokens
                        or not self._fits([*cur, i], shape)):
                break
            cur.append(i)
            longest = new_longest
        return cur

    def _fits(self, idx: list[int], shape: dict[int, tuple[int, int, int]]) -> bool:
        g = memory.Group([shape[i][0] for i in idx], [shape[i][1] for i in idx], max(shape[i][2] for i in idx),
                         self.config.votes)
        return memory.fits(self.sizes, g, self.attn, self._dtype_bytes(), self.memory_budget)

    def _prompt_rows(self, reqs: list[Request], planned: list[list[int] | None]) -> dict[int, list[int]]:
        """Token ids of the requests whose images were planned."""
        t0 = time.perf_counter()
        ready = [k for k, p in enumerate(planned) if p is not None]
        ids = self.encoder.prompt_ids([reqs[k] for k in ready], [planned[k] for k in ready]) if ready else []
        rows = dict(zip(ready, ids))
        self.counts["tokenize_us"] += int((time.perf_counter() - t0) * 1e6)
        return rows

    def generate(self, requests: list[Request]) -> list[Output]:
        """One Output per Request, in order."""
        outputs = dict(pair for ready in self.generate_iter(requests) for pair in ready)
        return [outputs[i] for i in range(len(requests))]

    def generate_iter(self, requests: list[Request]) -> Iterator[list[tuple[int, Output]]]:
        """[(index, Output), ...] of one length group at a time, as each finishes generating."""
        planned = plan_tokens([r.images for r in requests], self.images.cfg)  # headers only
        est = {i: self._estimate(r, planned[i]) for i, r in enumerate(requests)}
        shape = {i: self._shape(r, planned[i]) for i, r in enumerate(requests)}
        rest = sorted(range(len(requests)), key=lambda i: est[i], reverse=True)

        def take():
            """The next group, formed at the budget as it is now, and its images submitted for decoding."""
            nonlocal rest
            group = self._group(rest, est, shape)
            rest = rest[len(group):]
            return group, self.images.submit([requests[i].images for i in group]) if group else None

        group, pending = take()
        while group:
            # tokenize this group's prompts while its images decode in the background
            rows = self._prompt_rows([requests[i] for i in group], [planned[i] for i in group])
            t0 = time.perf_counter()
            imgs = pending.result()
            self.counts["prepare_wait_us"] += int((time.perf_counter() - t0) * 1e6)
            nxt, pending = take()  # the next group's images decode during this generation
            failed = [(i, Output(error=imgs.errors[k], n_images=len(requests[i].images)))
                      for k, i in enumerate(group) if k in imgs.errors]
            ok = [k for k in range(len(group)) if k not in imgs.errors]
            for k in ok:  # the plan and the decoded images agree unless a file changed in between
                if k not in rows or planned[group[k]] != imgs.tokens_per_image[k]:
                    rows[k] = self.encoder.prompt_ids([requests[group[k]]], [imgs.tokens_per_image[k]])[0]
            t0 = time.perf_counter()
            try:
                outs = self._run_split([requests[group[k]] for k in ok], _subset(imgs, ok), [rows[k] for k in ok],
                                       [est[group[k]] for k in ok])
            finally:
                self.budget.group_done()  # the group and its retries are done: the budget may grow
            self.counts["generate_us"] += int((time.perf_counter() - t0) * 1e6)
            yield failed + [(group[k], out) for k, out in zip(ok, outs)]
            group = nxt

    def _run_split(self, reqs: list[Request], imgs: BatchImages, rows: list[list[int]],
                   costs: list[int] | None = None) -> list[Output]:
        """Generate, halving the batch on out-of-memory until every request is done; a part over the
        (lowered) token budget is split before it runs. The retry runs outside the exception handler,
        so the failed attempt's tensors are freed."""
        if not reqs:
            return []
        costs = costs or [len(r) for r in rows]
        cost = len(reqs) * max(costs)
        if len(reqs) > 1 and cost > self.max_batch_tokens:
            k = next(n for n in range(len(reqs), 0, -1) if n == 1 or n * max(costs[:n]) <= self.max_batch_tokens)
            return self._split_at(k, reqs, imgs, rows, costs)
        outs, oom = self._attempt(reqs, imgs, rows)
        if oom is None:
            self.budget.fitted(cost)
            # the memory model's estimate of the largest attempt that ran (eval/gpu_check.py: vs the measured peak)
            g = memory.Group([len(r) for r in rows], [imgs.visual_tokens(b) for b in range(len(rows))],
                             max(r.cap(self.config.max_new_tokens) for r in reqs), self.config.votes)
            est = memory.estimate(self.sizes, g, self.attn, self._dtype_bytes(), self.device.type).total
            self.counts["peak_estimate"] = max(self.counts["peak_estimate"], int(est))
            return outs
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        self.budget.out_of_memory(cost, len(reqs))
        if len(reqs) == 1:
            return [Output(error=f"out of memory even at batch size 1 ({oom}; {len(rows[0])} prompt tokens): lower "
                                 "--max-visual-tokens (e.g. 6144) or --max-images, or load the model with "
                                 "--load-in-4bit", n_images=len(reqs[0].images))]
        self.counts["oom_splits"] += 1
        return self._split_at(len(reqs) // 2, reqs, imgs, rows, costs)

    def _split_at(self, k: int, reqs: list[Request], imgs: BatchImages, rows: list[list[int]],
                  costs: list[int]) -> list[Output]:
        """`_run_split` of the first `k` requests, then of the rest."""
        return (self._run_split(reqs[:k], _subset(imgs, range(k)), rows[:k], costs[:k])
                + self._run_split(reqs[k:], _subset(imgs, range(k, len(reqs))), rows[k:], costs[k:]))

    def _attempt(self, reqs, imgs, rows) -> tuple[list[Output], str | None]:
        """(outputs, None), or ([], message) on out-of-memory; only the message leaves the handler."""
        try:
            return self._run(reqs, imgs, rows), None
        except Exception as exc:
            if not is_oom(exc):
                raise
            return [], f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"

    def _newline_ids(self) -> torch.Tensor:
        if self._newline is None:
            vocab = self.model.get_output_embeddings().weight.shape[0]
            self._newline = newline_table(self.tokenizer, vocab).to(self.device)
        return self._newline

    @torch.inference_mode()
    def _run(self, reqs: list[Request], imgs: BatchImages, rows: list[list[int]]) -> list[Output]:
        inputs = self.encoder.collate(rows, imgs, self.device, self.pixel_dtype)
        if self.inject_oom is not None and self.inject_oom(len(reqs)):
            raise OutOfMemory("CUDA out of memory (injected)")
        k = self.config.votes
        caps = [r.cap(self.config.max_new_tokens) for r in reqs]
        row_caps = [c for c in caps for _ in range(k)]  # num_return_sequences repeats each request k times
        prefixes = [r.stop_after_line for r in reqs for _ in range(k)]
        prompt_len = inputs["input_ids"].shape[1]
        stop = RowStop(self.tokenizer, self._newline_ids() if any(prefixes) else torch.zeros(1, dtype=torch.bool),
                       prefixes, row_caps, prompt_len, [self.opens_thinking] * len(row_caps))
        watch = sorted({w for r in reqs for w in r.watch})
        recorder = WatchRecorder([self.tokenizer.convert_tokens_to_ids(w) for w in watch]) if watch else None
        gen_kwargs = dict(max_new_tokens=max(caps), do_sample=k > 1, num_return_sequences=k,
                          return_dict_in_generate=True, pad_token_id=self.tokenizer.pad_token_id,
                          eos_token_id=self.eos_ids or None, stopping_criteria=StoppingCriteriaList([stop]),
                          logits_processor=LogitsProcessorList([recorder]) if recorder else None,
                          temperature=None, top_p=None, top_k=None)
        if self.config.compile:
            gen_kwargs["cache_implementation"] = "static"  # transformers compiles the decode step on CUDA
        if k > 1:
            torch.manual_seed(self.config.sampling_seed)
            gen_kwargs.update(temperature=self.config.temperature, top_k=0, top_p=1.0)
        res = self.model.generate(**inputs, **gen_kwargs)
        gen = res.sequences[:, prompt_len:].cpu()
        probs = recorder.stacked() if recorder else None  # (B*k, steps, len(watch)): small, unlike full logits
        self.counts["groups"] += 1
        self.counts["rows"] += len(reqs)
        outs = []
        for b, r in enumerate(reqs):
            samples = []
            for s in range(k):
                row = b * k + s
                limit = stop.ends.get(row, row_caps[row])
                text, token_probs, n, eos = self._decode(gen[row, :limit], probs[row] if probs is not None else None,
                                                         watch, r.watch)
                if row in stop.ends:  # a token that ended the line may carry text of the next one
                    text = cut_after_line(text, r.stop_after_line, self.opens_thinking) or text
                    token_probs = [p for p in token_probs if p.offset < len(text)]
                samples.append((text, token_probs, n, not eos and row not in stop.ends and n >= row_caps[row]))
            hit_cap = any(x[3] for x in samples)
            self.counts["hit_cap"] += hit_cap
            self.counts["stopped_at_line"] += any(b * k + s in stop.ends for s in range(k))
            outs.append(Output(text=samples[0][0], prompt_tokens=len(rows[b]),
                               completion_tokens=sum(x[2] for x in samples), token_probs=samples[0][1],
                               n_images=len(r.images), visual_tokens=imgs.visual_tokens(b), hit_cap=hit_cap,
                               samples=[(x[0], x[1]) for x in samples] if k > 1 else [],
                               opened_thinking=self.opens_thinking))
        return outs

    def _decode(self, ids: torch.Tensor, probs: torch.Tensor | None, columns: list[str], watch: tuple[str, ...]):
        """(text, watched-token probabilities at the positions where a watched token was generated,
        number of generated tokens, whether it ended with EOS); `probs` is (steps, len(columns))."""
        ids = ids.tolist()
        n = next((j for j, t in enumerate(ids) if t in self.eos_ids or t == self.tokenizer.pad_token_id), len(ids))
        eos, ids = n < len(ids), ids[:n]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        if not watch or probs is None:
            return text, [], n, eos
        wanted = {self.tokenizer.convert_tokens_to_ids(w) for w in watch}
        out = [TokenProbs(offset=offset, probs={w: float(probs[j, c]) for c, w in enumerate(columns) if w in watch})
               for j, offset in watched_offsets(self.tokenizer, ids[:probs.shape[0]], wanted)]
        return text, out, n, eos

    @torch.inference_mode()
    def next_token_probs(self, requests, prefixes, candidates=("0", "1")):
        """P(next token) for each candidate after each request + assistant prefix (one forward)."""
        out = []
        cid = {c: self.tokenizer.convert_tokens_to_ids(c) for c in candidates}
        imgs = self.images.process([r.images for r in requests])
        for k, (r, prefix) in enumerate(zip(requests, prefixes)):
            if k in imgs.errors:
                raise ValueError(f"request {r.tag or k}: {imgs.errors[k]}")
            inputs = self.encode([r], _subset(imgs, [k]), [prefix], device=self.device)
            logits = self.model(**inputs, logits_to_keep=1).logits[0, -1].float()
            p = torch.softmax(logits, dim=-1)
            out.append({c: float(p[i]) for c, i in cid.items()})
        return out

    def close(self) -> None:
        self.images.close()


def _subset(imgs: BatchImages, idx) -> BatchImages:
    """The images of some requests of a batch (rows are contiguous per request, in order)."""
    idx, grid = list(idx), imgs.image_grid_thw
    tokens = [imgs.tokens_per_image[i] for i in idx]
    if idx == list(range(len(imgs.tokens_per_image))):
        return BatchImages(imgs.patches, grid, tokens, {}, imgs.cfg)
    img_start = [0, *accumulate(len(t) for t in imgs.tokens_per_image)]
    row_start = [0, *accumulate((grid[:, 1] * grid[:, 2]).tolist())] if grid is not None else [0]
    spans = [(img_start[i], img_start[i + 1]) for i in idx if img_start[i + 1] > img_start[i]]
    if not spans:
        return BatchImages(None, None, tokens, {}, imgs.cfg)
    patches = torch.cat([imgs.patches[row_start[a]:row_start[b]] for a, b in spans])
    if imgs.patches.is_pinned():
        patches = patches.pin_memory()
    return BatchImages(patches, torch.cat([grid[a:b] for a, b in spans]), tokens, {}, imgs.cfg)


