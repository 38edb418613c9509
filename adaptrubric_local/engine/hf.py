"""The transformers backend: Qwen3-VL in-process, batched, on one GPU (or the CPU).

Loads a checkpoint from a hub id or a local folder with `from_pretrained` (safetensors only, never
`trust_remote_code`), optionally 4/8-bit through bitsandbytes and with a LoRA adapter through peft.
Requests are bucketed by length into sub-batches under a token budget; the images of the next
sub-batch are preprocessed in the background while the current one generates; a CUDA
out-of-memory error splits the sub-batch in half and retries, so every request gets its output.
Greedy decoding by default, with a `max_new_tokens` cap; `votes > 1` samples k outputs per request.
P(token) for watched tokens ("0"/"1") is read from the generation logits, no second pass.
Knows nothing about rubrics, routing or verdicts.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable, Optional

import torch

from transformers import LogitsProcessorList

from .base import Engine, Output, Request, TokenProbs
from .hf_config import DEFAULT_MODEL, HFEngineConfig  # noqa: F401 (re-exported)
from .images import BatchImages, ImageConfig, ImagePipeline, image_size, pin, target_sizes

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # we use our own threads; avoid fork warnings
IMAGE_PAD = "<|image_pad|>"


class WatchRecorder:
    """A logits processor that records, at every generation step, the softmax probabilities of a few
    watched token ids and passes the scores through unchanged (instead of keeping every step's full
    vocabulary logits, which for a batch of 16 x 256 steps is gigabytes)."""

    def __init__(self, token_ids: list[int]):
        self.ids = torch.tensor(token_ids, dtype=torch.long)
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        ids = self.ids.to(scores.device)
        self.steps.append(torch.softmax(scores.float(), dim=-1).index_select(-1, ids))
        return scores

    def stacked(self) -> Optional[torch.Tensor]:
        """(batch, steps, watched) on the CPU, or None before the first step."""
        return torch.stack(self.steps, dim=1).cpu() if self.steps else None


class OutOfMemory(RuntimeError):
    """Raised by the fault-injection hook to simulate a CUDA out-of-memory error."""


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, (torch.OutOfMemoryError, OutOfMemory)) or "out of memory" in str(exc).lower()


class HFEngine(Engine):
    """Qwen3-VL through transformers, in-process."""

    def __init__(self, config: Optional[HFEngineConfig] = None, **overrides):
        self.config = config or HFEngineConfig(**overrides)
        self.name = self.config.model + (f"+{self.config.adapter}" if self.config.adapter else "")
        self.model, self.processor = load_model(self.config)
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = "left"
        self.device = next(self.model.parameters()).device
        overrides = {"workers": self.config.image_workers, "max_visual_tokens": self.config.max_visual_tokens}
        if self.config.max_pixels:
            overrides["max_pixels"] = self.config.max_pixels
        self.images = ImagePipeline(ImageConfig.from_processor(self.processor.image_processor, **overrides))
        self.eos_ids = _eos_ids(self.model, self.tokenizer)
        self.inject_oom: Optional[Callable[[int], bool]] = None  # test hook: batch size -> raise OOM?
        self.oom_splits = 0

    # ------------------------------------------------------------------ prompt assembly
    def _chat_text(self, req: Request) -> str:
        content = [{"type": "text", "text": req.prompt}] + [{"type": "image"} for _ in req.images]
        if req.suffix:
            content.append({"type": "text", "text": req.suffix})
        return self.processor.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                  add_generation_prompt=True)

    @staticmethod
    def _expand_images(text: str, tokens: list[int]) -> str:
        parts = text.split(IMAGE_PAD)
        if len(parts) - 1 != len(tokens):
            raise ValueError(f"prompt has {len(parts) - 1} image slots for {len(tokens)} images")
        return parts[0] + "".join(IMAGE_PAD * n + rest for n, rest in zip(tokens, parts[1:]))

    def _estimate(self, req: Request) -> int:
        """Prompt length in tokens: text by characters, images by their planned sizes (headers only)."""
        text = len(req.prompt + req.suffix) // 3
        try:
            sizes = target_sizes([image_size(p) for p in req.images], self.images.cfg)
        except Exception:  # unreadable: the image pipeline will report it
            return text
        f = self.images.cfg.factor
        return text + sum((h // f) * (w // f) for h, w in sizes)

    # ------------------------------------------------------------------ batching
    def _sub_batches(self, order: list[int], est: dict[int, int]) -> list[list[int]]:
        """Length-sorted groups under the batch-size and padded-token budgets."""
        groups, cur, longest = [], [], 0
        for i in order:
            new_longest = max(longest, est[i])
            if cur and (len(cur) >= self.config.max_batch_size or new_longest * (len(cur) + 1) > self.config.max_batch_tokens):
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
        est = {i: self._estimate(r) for i, r in enumerate(requests)}
        order = sorted(range(len(requests)), key=lambda i: est[i], reverse=True)
        groups = self._sub_batches(order, est)
        pending = self.images.submit([requests[i].images for i in groups[0]]) if groups else None
        for g, group in enumerate(groups):
            imgs = pin(pending.result())
            if g + 1 < len(groups):  # overlap the next group's preprocessing with this generation
                pending = self.images.submit([requests[i].images for i in groups[g + 1]])
            for k, i in enumerate(group):
                if k in imgs.errors:
                    outputs[i] = Output(error=imgs.errors[k], n_images=len(requests[i].images))
            ok = [k for k in range(len(group)) if k not in imgs.errors]
            for k, out in zip(ok, self._run_split([requests[group[k]] for k in ok], _subset(imgs, ok))):
                outputs[group[k]] = out
        return outputs  # type: ignore[return-value]

    def _run_split(self, reqs: list[Request], imgs: BatchImages) -> list[Output]:
        """Generate, halving the batch on out-of-memory until every request is done."""
        if not reqs:
            return []
        try:
            if self.inject_oom is not None and self.inject_oom(len(reqs)):
                raise OutOfMemory("CUDA out of memory (injected)")
            return self._run(reqs, imgs)
        except Exception as exc:
            if not _is_oom(exc):
                raise
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if len(reqs) == 1:
                return [Output(error=f"out of memory even at batch size 1 ({exc})", n_images=len(reqs[0].images))]
            self.oom_splits += 1
            half = len(reqs) // 2
            return (self._run_split(reqs[:half], _subset(imgs, range(half)))
                    + self._run_split(reqs[half:], _subset(imgs, range(half, len(reqs)))))

    def encode(self, reqs: list[Request], imgs: BatchImages, prefixes: Optional[list[str]] = None) -> dict:
        """Model inputs for a batch, exactly as the Qwen3-VL processor would build them: left-padded
        ids with each image's pad token repeated once per visual token, the attention mask,
        `mm_token_type_ids` (which M-RoPE needs to place image tokens), pixels and grids."""
        texts = [self._expand_images(self._chat_text(r), imgs.tokens_per_image[k]) + (prefixes[k] if prefixes else "")
                 for k, r in enumerate(reqs)]
        enc = self.tokenizer(texts, padding=True, return_tensors="pt", add_special_tokens=False)
        ids = enc["input_ids"]
        cfg = self.model.config
        types = torch.zeros_like(ids)
        types[ids == cfg.image_token_id] = 1
        types[ids == cfg.video_token_id] = 2
        inputs = {"input_ids": ids, "attention_mask": enc["attention_mask"], "mm_token_type_ids": types}
        if imgs.pixel_values is not None:
            inputs["pixel_values"] = imgs.pixel_values
            inputs["image_grid_thw"] = imgs.image_grid_thw
        return inputs

    def _to_device(self, inputs: dict) -> dict:
        return {k: v.to(self.device, non_blocking=k == "pixel_values") for k, v in inputs.items()}

    @torch.inference_mode()
    def _run(self, reqs: list[Request], imgs: BatchImages) -> list[Output]:
        enc = self.encode(reqs, imgs)
        inputs = self._to_device(enc)
        k = self.config.votes
        cap = self.config.max_new_tokens
        max_new = min(cap, max(r.max_new_tokens or cap for r in reqs))
        watch = sorted({w for r in reqs for w in r.watch})
        recorder = WatchRecorder([self.tokenizer.convert_tokens_to_ids(w) for w in watch]) if watch else None
        gen_kwargs = dict(max_new_tokens=max_new,
                          do_sample=k > 1, num_return_sequences=k, return_dict_in_generate=True,
                          pad_token_id=self.tokenizer.pad_token_id, eos_token_id=self.eos_ids,
                          logits_processor=LogitsProcessorList([recorder]) if recorder else None)
        if k > 1:
            torch.manual_seed(self.config.seed)
            gen_kwargs.update(temperature=self.config.temperature, top_k=0, top_p=1.0)
        else:
            gen_kwargs.update(temperature=None, top_p=None, top_k=None)
        res = self.model.generate(**inputs, **gen_kwargs)
        prompt_len = enc["input_ids"].shape[1]
        gen = res.sequences[:, prompt_len:].cpu()
        probs = recorder.stacked() if recorder else None  # (B*k, steps, len(watch)): small, unlike full logits
        outs = []
        for b, r in enumerate(reqs):
            samples = [self._decode(gen[b * k + s], probs[b * k + s] if probs is not None else None, watch, r.watch)
                       for s in range(k)]
            text, token_probs, _ = samples[0]
            outs.append(Output(text=text, prompt_tokens=int(enc["attention_mask"][b].sum()),
                               completion_tokens=sum(s[2] for s in samples), token_probs=token_probs,
                               n_images=len(r.images), visual_tokens=imgs.visual_tokens(b),
                               samples=[(t, p) for t, p, _ in samples] if k > 1 else []))
        return outs

    def _decode(self, ids: torch.Tensor, probs: Optional[torch.Tensor], columns: list[str], watch: tuple[str, ...]):
        """(text, watched-token probabilities at the positions where a watched token was generated,
        number of generated tokens); `probs` is (steps, len(columns))."""
        ids = ids.tolist()
        n = len(ids)
        for j, t in enumerate(ids):
            if t in self.eos_ids or t == self.tokenizer.pad_token_id:
                n = j
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
        return text, out, n

    @torch.inference_mode()
    def next_token_probs(self, requests, prefixes, candidates=("0", "1")):
        """P(next token) for each candidate after each request + assistant prefix (one forward)."""
        out = []
        cid = {c: self.tokenizer.convert_tokens_to_ids(c) for c in candidates}
        imgs = self.images.process([r.images for r in requests])
        for k, (r, prefix) in enumerate(zip(requests, prefixes)):
            if k in imgs.errors:
                raise ValueError(f"request {r.tag or k}: {imgs.errors[k]}")
            inputs = self._to_device(self.encode([r], _subset(imgs, [k]), [prefix]))
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
        return BatchImages(imgs.pixel_values, imgs.image_grid_thw, list(imgs.tokens_per_image), {})
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
            pv.append(imgs.pixel_values[row_start[a]:row_start[b]])
            grids.append(imgs.image_grid_thw[a:b])
        tokens.append(imgs.tokens_per_image[i])
    return BatchImages(torch.cat(pv) if pv else None, torch.cat(grids) if grids else None, tokens, {})


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


def load_model(cfg: HFEngineConfig):
    """(model, processor) from a hub id or a local folder, the same path for both."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    if not torch.cuda.is_available():
        # masked grouped-query attention: on the CPU the fused path beats repeating K/V per head (3x on the
        # decode step); transformers keeps it off by default because CUDA's masked GQA hits the math kernel
        os.environ.setdefault("TRANSFORMERS_SDPA_FORCE_GQA", "1")
    local = Path(cfg.model).is_dir()
    if not local and (cfg.model.startswith((".", "/", "~")) or os.sep in cfg.model.strip("/").replace("/", "", 1)):
        raise ValueError(f"model folder not found: {cfg.model} (give a local folder saved with save_pretrained, "
                         "or a hub id such as Qwen/Qwen3-VL-8B-Instruct)")
    common = dict(trust_remote_code=False, local_files_only=True)
    try:  # a local folder, or a hub id already in the local cache: no network at all
        processor = AutoProcessor.from_pretrained(cfg.model, **common)
    except OSError as exc:
        if local or os.environ.get("HF_HUB_OFFLINE") == "1":
            raise ValueError(f"cannot load {cfg.model!r} from local files: {exc}") from None
        print(f"{cfg.model}: not in the local cache; downloading from the hub (set HF_HUB_OFFLINE=1 to fail "
              "instead on machines without network)", file=sys.stderr)
        common["local_files_only"] = False
        try:
            processor = AutoProcessor.from_pretrained(cfg.model, **common)
        except OSError as exc2:
            raise ValueError(f"cannot load {cfg.model!r}: {exc2}") from None
    if not hasattr(processor, "image_processor"):
        raise ValueError(f"{cfg.model}: AutoProcessor gave {type(processor).__name__}, not a vision processor")
    kwargs = dict(common, dtype=_dtype(cfg), use_safetensors=True)
    cuda = torch.cuda.is_available()
    if cuda and cfg.device_map:
        kwargs["device_map"] = cfg.device_map
    attn = cfg.attn_implementation
    if attn is None and cuda:
        attn = "flash_attention_2" if importlib.util.find_spec("flash_attn") else "sdpa"
    if attn is None or attn == "sdpa_padded_prefill":  # the CPU default: see engine/attention.py
        from .attention import register

        attn = register()
    kwargs["attn_implementation"] = attn
    if cfg.load_in_4bit or cfg.load_in_8bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=cfg.load_in_4bit, load_in_8bit=cfg.load_in_8bit, bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=torch.bfloat16 if cuda else torch.float32, bnb_4bit_use_double_quant=True,
            llm_int8_skip_modules=["model.visual", "lm_head"])  # quantise the language model only
    model = AutoModelForImageTextToText.from_pretrained(cfg.model, **kwargs)
    if cfg.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, cfg.adapter, is_trainable=False)
    model.eval()
    return model, processor
