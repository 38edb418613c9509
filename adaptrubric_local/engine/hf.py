"""The transformers backend: Qwen3-VL in-process, batched, on one GPU (or the CPU).

Loads a checkpoint from a hub id or a local folder with `from_pretrained` (safetensors only, never
`trust_remote_code`; a hub id whose files are all in the local cache loads without the network),
optionally 4/8-bit through bitsandbytes and with a LoRA adapter through peft. Requests are sorted
by length and grouped under a batch size and a padded-token budget (derived from free GPU memory
and the model's KV-cache bytes per token unless given); the images of the next group are decoded
in the background (as uint8, in pinned memory on a GPU, normalised on the device) while the
current one generates, and the first group's prompts are tokenized while its images decode. A
CUDA out-of-memory error drops the failed attempt (outside the exception handler, so nothing of it
stays alive), frees the cache and retries the group in halves, so every request gets its output.
Greedy decoding by default, with a `max_new_tokens` cap per row; a row ends early after a complete
line starting with its `stop_after_line`; `votes > 1` samples k outputs per request. P(token) for
watched tokens ("0"/"1") is read from the generation logits on the device, copied once at the end.
`stats` counts groups and rows (rows per group), out-of-memory splits and rows that hit the cap.
Knows nothing about rubrics, routing or verdicts.
"""
from __future__ import annotations

import gc
import importlib.util
import os
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Optional

import torch

from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from .base import Engine, Output, Request, TokenProbs, cut_after_line
from .encoding import Encoder
from .hf_config import CPU_BATCH_TOKENS, DEFAULT_MODEL, HFEngineConfig  # noqa: F401 (re-exported)
from .images import BatchImages, ImageConfig, ImagePipeline, plan_tokens

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # we use our own threads; avoid fork warnings
GPU_MEMORY_FRACTION = 0.85  # share of the free GPU memory (after loading) that groups may fill
MASK_BYTES_PER_TOKEN = 32_768  # SDPA's padded (B, 1, L, L) bool mask, for rows up to 32K tokens


class WatchRecorder:
    """A logits processor that records, at every generation step, the softmax probabilities of a few
    watched token ids and passes the scores through unchanged (instead of keeping every step's full
    vocabulary logits, which for a batch of 16 x 256 steps is gigabytes). Everything stays on the
    scores' device until `stacked` copies it to the host once."""

    def __init__(self, token_ids: list[int]):
        self.ids = torch.tensor(token_ids, dtype=torch.long)
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.ids.device != scores.device:  # once per generate call, not per step
            self.ids = self.ids.to(scores.device)
        self.steps.append(torch.softmax(scores.float(), dim=-1).index_select(-1, self.ids))
        return scores

    def stacked(self) -> Optional[torch.Tensor]:
        """(batch, steps, watched) on the CPU, or None before the first step."""
        return torch.stack(self.steps, dim=1).cpu() if self.steps else None


class RowStop(StoppingCriteria):
    """Per-row stopping over token ids: a row is done at its own new-token cap, or right after a
    complete line (ended by a newline token) that starts with the row's prefix. Each step costs one
    table lookup on the device and one boolean read; only rows that just produced a newline decode
    their current line (never the whole text). `ends[row]` is the number of tokens a row kept when
    its line stopped it (absent for rows the line did not stop)."""

    def __init__(self, tokenizer, newline: torch.Tensor, prefixes: list[Optional[str]], caps: list[int],
                 prompt_len: int):
        self.tok, self.newline, self.prefixes, self.caps = tokenizer, newline, prefixes, caps
        self.prompt_len = prompt_len
        self.line_start = [prompt_len] * len(caps)
        self.fragment = [False] * len(caps)  # the current line starts inside a token that ended the last one
        self.ends: dict[int, int] = {}
        self.done: Optional[torch.Tensor] = None
        self.watching = any(p is not None for p in prefixes)

    def __call__(self, input_ids: torch.Tensor, scores=None, **kwargs) -> torch.Tensor:
        dev = input_ids.device
        if self.done is None:
            self.done = torch.zeros(len(self.caps), dtype=torch.bool, device=dev)
            self._caps = torch.tensor(self.caps, device=dev)
            self._watch = torch.tensor([p is not None for p in self.prefixes], device=dev)
            self.newline = self.newline.to(dev)
        n = input_ids.shape[1] - self.prompt_len
        self.done |= self._caps <= n
        if not self.watching:  # caps only: device work, no host read
            return self.done.clone()
        last = input_ids[:, -1]
        hit = self.newline[last.clamp(max=self.newline.numel() - 1)] & self._watch & ~self.done
        if bool(hit.any()):
            for b in hit.nonzero().flatten().tolist():
                self._line(b, input_ids[b, self.line_start[b]:].tolist(), input_ids.shape[1], n)
        return self.done.clone()

    def _line(self, b: int, ids: list[int], length: int, n: int) -> None:
        parts = self.tok.decode(ids, skip_special_tokens=True).split("\n")
        lines = parts[1:-1] if self.fragment[b] else parts[:-1]
        if any(line.startswith(self.prefixes[b]) for line in lines):
            self.done[b] = True
            self.ends[b] = n
            return
        self.fragment[b] = bool(parts[-1])  # text after the newline inside the same token
        self.line_start[b] = length - 1 if self.fragment[b] else length


class OutOfMemory(RuntimeError):
    """Raised by the fault-injection hook to simulate a CUDA out-of-memory error."""


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, (torch.OutOfMemoryError, OutOfMemory)) or "out of memory" in str(exc).lower()


def newline_table(tokenizer, vocab_size: int) -> torch.Tensor:
    """(vocab_size,) bool: which token ids decode to text containing a newline."""
    n = min(vocab_size, len(tokenizer))
    texts = tokenizer.batch_decode([[i] for i in range(n)], skip_special_tokens=True)
    table = torch.zeros(vocab_size, dtype=torch.bool)
    table[:n] = torch.tensor(["\n" in t for t in texts], dtype=torch.bool)
    return table


def kv_bytes_per_token(config, dtype: torch.dtype) -> int:
    """Bytes of KV cache one token costs in the language model (keys and values of every layer)."""
    text = getattr(config, "text_config", config)
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    return 2 * text.num_hidden_layers * kv_heads * head_dim * torch.finfo(dtype).bits // 8


def derived_batch_tokens(config, dtype: torch.dtype, free_bytes: int) -> int:
    """Padded tokens per group that fit in `free_bytes`: KV cache, the prefill's transient
    activations (MLP input and hidden states of one layer) and SDPA's padded mask, per token."""
    text = getattr(config, "text_config", config)
    act = (2 * text.intermediate_size + 4 * text.hidden_size) * torch.finfo(dtype).bits // 8
    per_token = kv_bytes_per_token(config, dtype) + act + MASK_BYTES_PER_TOKEN
    return max(4096, int(free_bytes * GPU_MEMORY_FRACTION) // per_token)


class HFEngine(Engine):
    """Qwen3-VL through transformers, in-process."""

    def __init__(self, config: Optional[HFEngineConfig] = None, loaded: Optional[tuple] = None, **overrides):
        """`loaded` = (model, processor) already in memory (benchmarks, a served model); otherwise
        `load_model(config)`."""
        self.config = config or HFEngineConfig(**overrides)
        self.name = self.config.model + (f"+{self.config.adapter}" if self.config.adapter else "")
        self.model, self.processor = loaded if loaded is not None else load_model(self.config)
        self.encoder = Encoder(self.processor, self.model.config.image_token_id, self.model.config.video_token_id)
        self.tokenizer = self.encoder.tokenizer
        self.device = next(self.model.parameters()).device
        cuda = self.device.type == "cuda"
        overrides = {"workers": self.config.image_workers, "max_visual_tokens": self.config.max_visual_tokens,
                     "pin_memory": cuda}
        if self.config.max_pixels:
            overrides["max_pixels"] = self.config.max_pixels
        self.images = ImagePipeline(ImageConfig.from_processor(self.processor.image_processor, **overrides))
        self.eos_ids = _eos_ids(self.model, self.tokenizer)
        self.pixel_dtype = next((p.dtype for n, p in self.model.named_parameters()
                                 if ".visual." in f".{n}" and p.is_floating_point()), torch.float32)
        self.max_batch_tokens = self.config.max_batch_tokens or self._derive_batch_tokens()
        self._newline: Optional[torch.Tensor] = None
        self.inject_oom: Optional[Callable[[int], bool]] = None  # test hook: rows -> raise OOM (inputs built)?
        self.counts: Counter = Counter()

    @property
    def oom_splits(self) -> int:
        return self.counts["oom_splits"]

    @property
    def stats(self) -> dict:
        """groups (generate calls), rows (requests in them), rows_per_group, oom_splits, hit_cap (rows
        cut by max_new_tokens), stopped_at_line (rows ended by stop_after_line), max_batch_tokens."""
        c = self.counts
        return {"groups": c["groups"], "rows": c["rows"],
                "rows_per_group": c["rows"] / c["groups"] if c["groups"] else 0.0,
                "oom_splits": c["oom_splits"], "hit_cap": c["hit_cap"], "stopped_at_line": c["stopped_at_line"],
                "max_batch_tokens": self.max_batch_tokens}

    def _derive_batch_tokens(self) -> int:
        if self.device.type != "cuda":
            return CPU_BATCH_TOKENS
        free, _ = torch.cuda.mem_get_info(self.device)
        dtype = next(p.dtype for p in self.model.parameters() if p.is_floating_point())
        dtype = dtype if dtype in (torch.bfloat16, torch.float16, torch.float32) else torch.bfloat16
        return derived_batch_tokens(self.model.config, dtype, free)

    # ------------------------------------------------------------------ prompt assembly (engine/encoding.py)
    def _chat_text(self, req: Request) -> str:
        return self.encoder.chat_text(req)

    def _token_rows(self, reqs: list[Request], tokens: list[list[int]],
                    prefixes: Optional[list[str]] = None) -> list[list[int]]:
        return self.encoder.prompt_ids(reqs, tokens, prefixes)

    def _collate(self, rows: list[list[int]], imgs: BatchImages, device=None) -> dict:
        return self.encoder.collate(rows, imgs, device, self.pixel_dtype)

    def encode(self, reqs: list[Request], imgs: BatchImages, prefixes: Optional[list[str]] = None,
               device=None) -> dict:
        """Model inputs for a batch, exactly as the Qwen3-VL processor would build them (float32
        pixels on the CPU when `device` is None; the engine's own path passes its device)."""
        return self._collate(self._token_rows(reqs, imgs.tokens_per_image, prefixes), imgs, device)

    def _estimate(self, req: Request, planned: Optional[list[int]]) -> int:
        """Padded tokens a request costs: text by characters, images by their planned sizes (headers
        only), the new tokens it may generate, times the samples drawn."""
        text = len(req.prompt + req.suffix) // 3
        new = min(self.config.max_new_tokens, req.max_new_tokens or self.config.max_new_tokens)
        return (text + sum(planned or []) + new) * self.config.votes

    # ------------------------------------------------------------------ batching
    def _sub_batches(self, order: list[int], est: dict[int, int]) -> list[list[int]]:
        """Length-sorted groups under the batch-size and padded-token budgets."""
        groups, cur, longest = [], [], 0
        for i in order:
            new_longest = max(longest, est[i])
            if cur and (len(cur) >= self.config.max_batch_size or new_longest * (len(cur) + 1) > self.max_batch_tokens):
                groups.append(cur)
                cur, new_longest = [], est[i]
            cur.append(i)
            longest = new_longest
        if cur:
            groups.append(cur)
        return groups

    def generate(self, requests: list[Request]) -> list[Output]:
        """One Output per Request, in order."""
        outputs: list[Optional[Output]] = [None] * len(requests)
        planned = plan_tokens([r.images for r in requests], self.images.cfg)  # headers only
        est = {i: self._estimate(r, planned[i]) for i, r in enumerate(requests)}
        order = sorted(range(len(requests)), key=lambda i: est[i], reverse=True)
        groups = self._sub_batches(order, est)
        pending = self.images.submit([requests[i].images for i in groups[0]]) if groups else None
        for g, group in enumerate(groups):
            # tokenize this group's prompts while its images decode in the background
            ready = [k for k, i in enumerate(group) if planned[i] is not None]
            rows = dict(zip(ready, self._token_rows([requests[group[k]] for k in ready],
                                                    [planned[group[k]] for k in ready]))) if ready else {}
            imgs = pending.result()
            if g + 1 < len(groups):  # overlap the next group's preprocessing with this generation
                pending = self.images.submit([requests[i].images for i in groups[g + 1]])
            for k, i in enumerate(group):
                if k in imgs.errors:
                    outputs[i] = Output(error=imgs.errors[k], n_images=len(requests[i].images))
            ok = [k for k in range(len(group)) if k not in imgs.errors]
            for k in ok:  # the plan and the decoded images agree unless a file changed in between
                if k not in rows or planned[group[k]] != imgs.tokens_per_image[k]:
                    rows[k] = self._token_rows([requests[group[k]]], [imgs.tokens_per_image[k]])[0]
            outs = self._run_split([requests[group[k]] for k in ok], _subset(imgs, ok), [rows[k] for k in ok])
            for k, out in zip(ok, outs):
                outputs[group[k]] = out
        return outputs  # type: ignore[return-value]

    def _run_split(self, reqs: list[Request], imgs: BatchImages, rows: list[list[int]]) -> list[Output]:
        """Generate, halving the batch on out-of-memory until every request is done. The retry runs
        after the exception handler has exited, so the failed attempt's tensors are already freed."""
        if not reqs:
            return []
        outs, oom = self._attempt(reqs, imgs, rows)
        if oom is None:
            return outs
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        if len(reqs) == 1:
            return [Output(error=f"out of memory even at batch size 1 ({oom})", n_images=len(reqs[0].images))]
        self.counts["oom_splits"] += 1
        half = len(reqs) // 2
        return (self._run_split(reqs[:half], _subset(imgs, range(half)), rows[:half])
                + self._run_split(reqs[half:], _subset(imgs, range(half, len(reqs))), rows[half:]))

    def _attempt(self, reqs, imgs, rows) -> tuple[list[Output], Optional[str]]:
        """(outputs, None), or ([], message) on out-of-memory; only the message leaves the handler."""
        try:
            return self._run(reqs, imgs, rows), None
        except Exception as exc:
            if not _is_oom(exc):
                raise
            return [], f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"

    def _newline_ids(self) -> torch.Tensor:
        if self._newline is None:
            vocab = self.model.get_output_embeddings().weight.shape[0]
            self._newline = newline_table(self.tokenizer, vocab).to(self.device)
        return self._newline

    @torch.inference_mode()
    def _run(self, reqs: list[Request], imgs: BatchImages, rows: list[list[int]]) -> list[Output]:
        inputs = self._collate(rows, imgs, self.device)
        if self.inject_oom is not None and self.inject_oom(len(reqs)):
            raise OutOfMemory("CUDA out of memory (injected)")
        k = self.config.votes
        caps = [min(self.config.max_new_tokens, r.max_new_tokens or self.config.max_new_tokens) for r in reqs]
        row_caps = [c for c in caps for _ in range(k)]  # num_return_sequences repeats each request k times
        prefixes = [r.stop_after_line for r in reqs for _ in range(k)]
        prompt_len = inputs["input_ids"].shape[1]
        stop = RowStop(self.tokenizer, self._newline_ids() if any(prefixes) else torch.zeros(1, dtype=torch.bool),
                       prefixes, row_caps, prompt_len)
        watch = sorted({w for r in reqs for w in r.watch})
        recorder = WatchRecorder([self.tokenizer.convert_tokens_to_ids(w) for w in watch]) if watch else None
        gen_kwargs = dict(max_new_tokens=max(caps), do_sample=k > 1, num_return_sequences=k,
                          return_dict_in_generate=True, pad_token_id=self.tokenizer.pad_token_id,
                          eos_token_id=self.eos_ids or None, stopping_criteria=StoppingCriteriaList([stop]),
                          logits_processor=LogitsProcessorList([recorder]) if recorder else None)
        if self.config.compile:
            gen_kwargs["cache_implementation"] = "static"  # transformers compiles the decode step on CUDA
        if k > 1:
            torch.manual_seed(self.config.seed)
            gen_kwargs.update(temperature=self.config.temperature, top_k=0, top_p=1.0)
        else:
            gen_kwargs.update(temperature=None, top_p=None, top_k=None)
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
                    text = cut_after_line(text, r.stop_after_line) or text
                    token_probs = [p for p in token_probs if p.offset < len(text)]
                samples.append((text, token_probs, n, not eos and row not in stop.ends and n >= row_caps[row]))
            hit_cap = any(x[3] for x in samples)
            self.counts["hit_cap"] += hit_cap
            self.counts["stopped_at_line"] += any(b * k + s in stop.ends for s in range(k))
            outs.append(Output(text=samples[0][0], prompt_tokens=len(rows[b]),
                               completion_tokens=sum(x[2] for x in samples), token_probs=samples[0][1],
                               n_images=len(r.images), visual_tokens=imgs.visual_tokens(b), hit_cap=hit_cap,
                               samples=[(x[0], x[1]) for x in samples] if k > 1 else []))
        return outs

    def _decode(self, ids: torch.Tensor, probs: Optional[torch.Tensor], columns: list[str], watch: tuple[str, ...]):
        """(text, watched-token probabilities at the positions where a watched token was generated,
        number of generated tokens, whether it ended with EOS); `probs` is (steps, len(columns))."""
        ids = ids.tolist()
        n, eos = len(ids), False
        for j, t in enumerate(ids):
            if t in self.eos_ids or t == self.tokenizer.pad_token_id:
                n, eos = j, True
                break
        ids = ids[:n]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        out: list[TokenProbs] = []
        if watch and probs is not None:
            wanted = {self.tokenizer.convert_tokens_to_ids(w) for w in watch}
            for j, t in enumerate(ids):
                if t in wanted and j < probs.shape[0]:
                    offset = len(self.tokenizer.decode(ids[:j], skip_special_tokens=True))
                    out.append(TokenProbs(offset=offset, probs={w: float(probs[j, c]) for c, w in enumerate(columns)
                                                                if w in watch}))
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
    idx = list(idx)
    if idx == list(range(len(imgs.tokens_per_image))):
        return BatchImages(imgs.patches, imgs.image_grid_thw, list(imgs.tokens_per_image), {}, imgs.cfg)
    per_image_rows = []
    if imgs.image_grid_thw is not None:
        per_image_rows = (imgs.image_grid_thw[:, 1] * imgs.image_grid_thw[:, 2]).tolist()
    counts = [len(t) for t in imgs.tokens_per_image]
    img_start = [sum(counts[:i]) for i in range(len(counts) + 1)]
    row_start = [0]
    for r in per_image_rows:
        row_start.append(row_start[-1] + r)
    pv, grids, tokens = [], [], []
    for i in idx:
        a, b = img_start[i], img_start[i + 1]
        if b > a:
            pv.append(imgs.patches[row_start[a]:row_start[b]])
            grids.append(imgs.image_grid_thw[a:b])
        tokens.append(imgs.tokens_per_image[i])
    patches = torch.cat(pv) if pv else None
    if patches is not None and imgs.patches.is_pinned():
        patches = patches.pin_memory()
    return BatchImages(patches, torch.cat(grids) if grids else None, tokens, {}, imgs.cfg)


def _eos_ids(model, tokenizer) -> list[int]:
    ids = model.generation_config.eos_token_id
    ids = list(ids) if isinstance(ids, (list, tuple)) else [ids] if ids is not None else []
    for t in ("<|im_end|>", "<|endoftext|>"):
        tid = tokenizer.convert_tokens_to_ids(t)
        if isinstance(tid, int) and tid >= 0 and tid not in ids:
            ids.append(tid)
    return ids


def _dtype(cfg: HFEngineConfig):
    if cfg.dtype == "fp32":
        return torch.float32
    if cfg.dtype == "fp16":
        return torch.float16
    if cfg.dtype == "bf16":
        return torch.bfloat16
    return torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float32


def _offline() -> bool:
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except Exception:  # pragma: no cover - huggingface_hub is a transformers dependency
        return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def offline_help(model: str) -> str:
    """How to make a hub id usable without network."""
    return (f"to run offline, download it once where the hub is reachable (`hf download {model}`) and copy the "
            "Hugging Face cache (~/.cache/huggingface/hub, or $HF_HUB_CACHE) to this machine, or save the model "
            "to a folder and pass the folder; set HF_HUB_OFFLINE=1 to never try the network")


def safetensors_help(folder: str) -> str:
    """How to convert a .bin checkpoint to safetensors."""
    return (f"{folder}: only .bin weights found; this package loads safetensors only (a .bin file is a pickle "
            "that can run code). Convert once, where you trust the file: python -c \"from transformers import "
            "AutoModelForImageTextToText as M, AutoProcessor as P; "
            f"M.from_pretrained('{folder}', use_safetensors=False).save_pretrained('{folder}-st'); "
            f"P.from_pretrained('{folder}').save_pretrained('{folder}-st')\" and pass {folder}-st")


def _check_weights(folder: Path) -> None:
    """A local checkpoint must hold safetensors weights; a .bin-only folder gets the conversion recipe."""
    names = {p.name for p in folder.iterdir()}
    if any(n.endswith(".safetensors") or n == "model.safetensors.index.json" for n in names):
        return
    if any(n.endswith(".bin") or n.endswith(".bin.index.json") for n in names):
        raise ValueError(safetensors_help(str(folder)))


def _attn_implementation(cfg: HFEngineConfig, cuda: bool) -> str:
    attn = cfg.attn_implementation
    if attn == "flash_attention_2" and not importlib.util.find_spec("flash_attn"):
        raise ValueError("--attn-implementation flash_attention_2 needs the flash-attn package, which is not "
                         "installed (pip install flash-attn --no-build-isolation, on a CUDA machine); or use sdpa")
    if attn is None and cuda:
        attn = "flash_attention_2" if importlib.util.find_spec("flash_attn") else "sdpa"
    if attn is None or attn == "sdpa_padded_prefill":  # the CPU default: see engine/attention.py
        from .attention import register

        attn = register()
    return attn


@contextmanager
def _hub_offline():
    """huggingface_hub's offline switch, on for the duration: `local_files_only` alone still lets it
    look up optional files (an adapter config) and its own metadata over the network."""
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - huggingface_hub is a transformers dependency
        yield
        return
    old = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = old


def _hub_unreachable(timeout: float = 5.0) -> Optional[str]:
    """Why the hub endpoint ($HF_ENDPOINT, default huggingface.co) cannot be reached, or None when it
    answers (any HTTP status): one request through huggingface_hub's own HTTP client (its proxies and
    certificates), no retries, in a thread so that a slow name lookup cannot hold it past `timeout`."""
    import threading

    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    endpoint, failure = constants.ENDPOINT, []

    def probe():
        try:
            get_session().head(endpoint, timeout=timeout, follow_redirects=False)
        except Exception as exc:  # any failure to get an answer: DNS, refused, TLS, timeout
            failure.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=probe, name="hub-probe", daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    if thread.is_alive():
        return f"{endpoint} did not answer within {timeout:g} s"
    return f"{endpoint} cannot be reached ({failure[0]})" if failure else None


def _from_pretrained(load, model: str, local: bool, what: str, **kwargs):
    """`load(model, ...)` from local files first (a folder, or a hub id already in the cache: no network
    at all); a hub id that is not (fully) cached is downloaded unless the hub is offline or cannot be
    reached (one quick check instead of the hub client's minutes of retries)."""
    try:
        with _hub_offline():
            return load(model, local_files_only=True, **kwargs)
    except OSError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if local:
        raise ValueError(f"cannot load the {what} of {model!r} from its folder: {first}") from None
    if _offline():
        raise ValueError(f"{model}: {what} not found in the local Hugging Face cache ({first}); "
                         + offline_help(model)) from None
    unreachable = _hub_unreachable()
    if unreachable:
        raise ValueError(f"cannot load the {what} of {model!r}: not in the local Hugging Face cache, and the hub "
                         f"at {unreachable}; {offline_help(model)}") from None
    print(f"{model}: {what} not in the local cache; downloading from the hub (set HF_HUB_OFFLINE=1 to "
          "fail instead on machines without network)", file=sys.stderr)
    try:
        return load(model, local_files_only=False, **kwargs)
    except OSError as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if ".bin" in msg or "use_safetensors" in msg:
            raise ValueError(f"{model}: no safetensors weights on the hub ({msg}); this package loads "
                             "safetensors only: convert as described in the README or use a safetensors "
                             "revision") from None
        raise ValueError(f"cannot load the {what} of {model!r}: {msg}; {offline_help(model)}") from None


def load_model(cfg: HFEngineConfig):
    """(model, processor) from a hub id or a local folder, the same path for both. Problems a user can
    fix (no flash-attn, .bin-only weights, a hub id not cached on an offline machine) are ValueErrors
    of one line saying how."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    cuda = torch.cuda.is_available()
    if not cuda:
        # masked grouped-query attention: on the CPU the fused path beats repeating K/V per head (3x on the
        # decode step); transformers keeps it off by default because CUDA's masked GQA hits the math kernel
        os.environ.setdefault("TRANSFORMERS_SDPA_FORCE_GQA", "1")
    local = Path(cfg.model).is_dir()
    if not local and (cfg.model.startswith((".", "/", "~")) or os.sep in cfg.model.strip("/").replace("/", "", 1)):
        raise ValueError(f"model folder not found: {cfg.model} (give a local folder saved with save_pretrained, "
                         "or a hub id such as Qwen/Qwen3-VL-8B-Instruct)")
    if local:
        _check_weights(Path(cfg.model))
    attn = _attn_implementation(cfg, cuda)
    processor = _from_pretrained(AutoProcessor.from_pretrained, cfg.model, local, "processor",
                                 trust_remote_code=False)
    if not hasattr(processor, "image_processor"):
        raise ValueError(f"{cfg.model}: AutoProcessor gave {type(processor).__name__}, not a vision processor")
    kwargs = dict(trust_remote_code=False, dtype=_dtype(cfg), use_safetensors=True, attn_implementation=attn)
    if cuda and cfg.device_map:
        kwargs["device_map"] = cfg.device_map
    if cfg.load_in_4bit or cfg.load_in_8bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=cfg.load_in_4bit, load_in_8bit=cfg.load_in_8bit, bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=torch.bfloat16 if cuda else torch.float32, bnb_4bit_use_double_quant=True,
            llm_int8_skip_modules=["model.visual", "lm_head"])  # quantise the language model only
    model = _from_pretrained(AutoModelForImageTextToText.from_pretrained, cfg.model, local, "model weights",
                             **kwargs)
    if cfg.adapter:
        from peft import PeftModel

        with _hub_offline():  # a local folder (checked in HFEngineConfig): nothing to fetch
            model = PeftModel.from_pretrained(model, cfg.adapter, is_trainable=False)
    model.eval()
    return model, processor
