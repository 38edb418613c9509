"""A memory plan for `distill train`, before a GPU hour is spent: the data's sequence lengths at the
training settings (same encoder and image planning as training; image headers only, no weight
loaded), and peak memory against the GPU present (or `--gpu-memory`), split into:
- weights, counted on the meta device (nf4 for the language model's linear layers under QLoRA);
- LoRA + optimizer: the adapter in float32 with its gradient and AdamW's two moments;
- activations, the larger of the vision tower's forward (no graph kept) and the language model's
  (a checkpoint per layer plus one layer's recomputed intermediates and what each LoRA branch keeps:
  `lora_input_bytes`), over the padded batch, plus the pixels;
- loss: logits at the labelled positions only, their gradient and one float32 cross-entropy chunk;
- runtime: on the CPU the interpreter's resident size; on a GPU the CUDA context is a reserve kept
  out of the budget (as `torch.cuda.max_memory_allocated` leaves it out).
A plan that does not fit names the changes that would. Knows nothing about training loops or files
other than the data it plans.
"""
from __future__ import annotations

import re
import statistics
import textwrap
from dataclasses import dataclass, field, fields, replace

GiB = 1024 ** 3
GPU_RESERVE = 1.5 * GiB  # CUDA context + allocator slack, outside max_memory_allocated
LANGUAGE_LINEAR = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)$"
VISION_LINEAR = r".*visual.*\.(qkv|proj|linear_fc1|linear_fc2)$"
NF4_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)  # 4-bit codes + fp8 absmax per 64 (double quant) + fp32 per 256 absmax


@dataclass
class Shape:
    """One example's lengths."""

    text: int
    visual: int
    target: int
    images: int = 0

    @property
    def total(self) -> int:
        return self.text + self.visual + self.target


@dataclass
class Setting:
    """What the estimate depends on besides the data."""

    dtype_bytes: int = 2  # compute dtype: 2 on a GPU (bf16), 4 on the CPU (fp32)
    load_in_4bit: bool = False
    lora_r: int = 16
    lora_dropout: float = 0.05
    train_vision: bool = False
    train_lm_head: bool = False
    gradient_checkpointing: bool = True
    batch_size: int = 1
    device: str = "cuda"  # cuda | cpu


@dataclass
class Estimate:
    """Peak memory of one training step, by part (bytes)."""

    weights: float
    lora_optimizer: float
    activations: float
    loss: float
    runtime: float = 0.0
    detail: dict = field(default_factory=dict)

    @property
    def total(self) -> float:
        return self.weights + self.lora_optimizer + self.activations + self.loss + self.runtime

    def as_gib(self) -> dict:
        parts = ("weights", "lora_optimizer", "activations", "loss", "runtime", "total")
        return {k: round(getattr(self, k) / GiB, 3) for k in parts}


# ----------------------------------------------------------------------------- architecture
@dataclass
class Arch:
    """The sizes the estimate reads off a Qwen3-VL config, and parameter counts by kind."""

    hidden: int
    intermediate: int
    layers: int
    q_dim: int
    kv_dim: int
    vocab: int
    v_hidden: int
    v_intermediate: int
    v_depth: int
    v_out: int
    n_deepstack: int
    params: dict  # language_linear, vision, embed, lm_head, other
    lora_params: int  # at r=1 on the language model's linear layers (scale by r)
    lora_vision_params: int  # at r=1 on the vision tower's linear layers


def arch_of(config) -> Arch:
    """Sizes and parameter counts of a Qwen3VLConfig (the model built on the meta device)."""
    import torch
    from transformers import AutoModelForImageTextToText

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config)
    counts = {"language_linear": 0, "vision": 0, "embed": 0, "lm_head": 0, "other": 0}
    for name, p in model.named_parameters():  # a tied parameter once
        kind = ("vision" if ".visual." in f".{name}" else "embed" if "embed_tokens" in name else
                "lm_head" if name.startswith("lm_head") else
                "language_linear" if re.match(LANGUAGE_LINEAR, name.rsplit(".", 1)[0]) else "other")
        counts[kind] += p.numel()
    lora = lora_v = 0
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear):
            if re.match(LANGUAGE_LINEAR, name):
                lora += mod.in_features + mod.out_features
            elif re.match(VISION_LINEAR, name):
                lora_v += mod.in_features + mod.out_features
    t, v = config.text_config, config.vision_config
    head_dim = getattr(t, "head_dim", None) or t.hidden_size // t.num_attention_heads
    return Arch(hidden=t.hidden_size, intermediate=t.intermediate_size, layers=t.num_hidden_layers,
                q_dim=t.num_attention_heads * head_dim, kv_dim=t.num_key_value_heads * head_dim,
                vocab=t.vocab_size, v_hidden=v.hidden_size, v_intermediate=v.intermediate_size, v_depth=v.depth,
                v_out=v.out_hidden_size, n_deepstack=len(getattr(v, "deepstack_visual_indexes", []) or []),
                params=counts, lora_params=lora, lora_vision_params=lora_v)


# ----------------------------------------------------------------------------- the estimate
def weights_bytes(a: Arch, s: Setting) -> float:
    """Every parameter at its load dtype (nf4 for the language model's linear layers under QLoRA)."""
    p = a.params
    rest = p["vision"] + p["embed"] + p["lm_head"] + p["other"]
    return p["language_linear"] * (NF4_BYTES if s.load_in_4bit else s.dtype_bytes) + rest * s.dtype_bytes


def lora_bytes(a: Arch, s: Setting) -> float:
    """Adapter weights in float32, their gradients and AdamW's two moments: 16 bytes a parameter."""
    n = s.lora_r * (a.lora_params + (a.lora_vision_params if s.train_vision else 0))
    if s.train_lm_head:
        n += a.vocab * a.hidden
    return 16.0 * n


def lora_input_bytes(s: Setting) -> float:
    """Bytes autograd keeps per element of an adapted layer's input for its LoRA branch (float32 adapters,
    peft's default). Under bf16 autocast the branch's first matmul keeps a bf16 copy of its input, dropout
    or not; dropout adds its mask: a bool one on CUDA (fused `native_dropout`), a float32 one on the CPU.
    In float32 (no autocast) the branch keeps only what dropout makes: its output and its mask; without
    dropout its input is the layer's own normed input."""
    dropout = s.lora_dropout > 0
    mask = 1 if s.device == "cuda" else 4
    if s.dtype_bytes == 2:
        return 2 + mask * dropout
    return (4 + mask) * dropout


def lm_layer_bytes_per_token(a: Arch, s: Setting) -> float:
    """What one decoder layer keeps for its backward, per token (see the module docstring)."""
    b = s.dtype_bytes
    h, q, kv, i = a.hidden, a.q_dim, a.kv_dim, a.intermediate
    norms = 2 * h * 4 + (q + kv) * 4  # RMSNorm keeps its float32 input (layer norms, q/k norms)
    attn = h * b + (q + 2 * kv) * b + 2 * q * b  # normed x; q, k, v after rope; attention out; o_proj input
    mlp = h * b + 4 * i * b  # normed x; gate, up, act(gate), act*up
    dropout = (3 * h + q + 2 * h + i) * lora_input_bytes(s)  # each adapted input, for its LoRA branch
    grads = 2 * (i + h) * b  # gradients in flight through the recomputed layer
    return norms + attn + mlp + dropout + grads


def vision_bytes_per_patch(a: Arch, s: Setting) -> float:
    """One vision block's working set per patch, with nothing kept for backward (frozen tower)."""
    b, h, i = s.dtype_bytes, a.v_hidden, a.v_intermediate
    return h * (3 * b + 4 + 3 * b + 2 * 4 + b) + 2 * i * b


def activation_bytes(a: Arch, s: Setting, shapes: list[Shape]) -> tuple[float, dict]:
    """The larger of the vision and language phases of a micro-batch of the longest examples."""
    rows = sorted(shapes, key=lambda x: x.total, reverse=True)[: s.batch_size]
    tokens = max(x.total for x in rows) * len(rows)  # left padding to the longest
    patches = sum(x.visual for x in rows) * 4  # 2x2 patches merge into one visual token
    b = s.dtype_bytes
    pixels = patches * 1536 * (1 + b)  # uint8 patches + normalised values (3 x 2 x 16 x 16 per patch)
    vision = patches * vision_bytes_per_patch(a, s) + sum(x.visual for x in rows) * a.v_out * b * (1 + a.n_deepstack)
    per_layer = lm_layer_bytes_per_token(a, s)
    kept = a.layers * a.hidden * b if s.gradient_checkpointing else a.layers * per_layer
    language = tokens * (kept + per_layer + 2 * a.hidden * b)  # + input embeddings and their gradient
    detail = {"tokens_per_step": tokens, "patches_per_step": patches, "pixels_gib": pixels / GiB,
              "vision_phase_gib": vision / GiB, "language_phase_gib": language / GiB}
    return pixels + max(vision, language), detail


def loss_bytes(a: Arch, s: Setting, shapes: list[Shape]) -> float:
    """Logits at the labelled positions only, their gradient, and one float32 chunk (x3)."""
    rows = sorted(shapes, key=lambda x: x.target, reverse=True)[: s.batch_size]
    n = sum(x.target for x in rows)
    return a.vocab * (n * 2 * s.dtype_bytes + min(n, 256) * 4 * 3)


def estimate(a: Arch, s: Setting, shapes: list[Shape], runtime: float = 0.0) -> Estimate:
    """Peak memory of a training step over the longest examples."""
    act, detail = activation_bytes(a, s, shapes)
    return Estimate(weights=weights_bytes(a, s), lora_optimizer=lora_bytes(a, s), activations=act,
                    loss=loss_bytes(a, s, shapes), runtime=runtime, detail=detail)


def cpu_runtime_bytes() -> float:
    """Resident size of this process with torch, transformers and peft imported (what a training
    process holds before any tensor of the run)."""
    import peft  # noqa: F401
    import psutil
    import torch  # noqa: F401
    import transformers  # noqa: F401
    from transformers import Trainer  # noqa: F401

    return float(psutil.Process().memory_info().rss)


# ----------------------------------------------------------------------------- summaries and advice
def length_stats(shapes: list[Shape]) -> dict:
    """p50/p95/max of text, visual and total tokens."""
    def pct(xs: list[int]) -> dict:
        xs = sorted(xs)
        return {"p50": int(statistics.median(xs)), "p95": xs[min(len(xs) - 1, int(0.95 * len(xs)))], "max": xs[-1]}

    return {"examples": len(shapes), "text": pct([x.text + x.target for x in shapes]),
            "visual": pct([x.visual for x in shapes]), "total": pct([x.total for x in shapes])}


def fits(est: Estimate, budget: float | None) -> bool | None:
    """Whether the estimate fits `budget` bytes of GPU memory (less the fixed reserve)."""
    return None if budget is None else est.total <= budget - GPU_RESERVE


def parse_memory(text: str) -> float:
    """'24GB', '24GiB', '80 G', '24' (GiB) -> bytes."""
    m = re.fullmatch(r"\s*([\d.]+)\s*(gib|gb|g)?\s*", str(text).lower())
    if not m:
        raise ValueError(f"cannot read a memory size from {text!r}; write e.g. 24GB")
    return float(m.group(1)) * GiB


# ----------------------------------------------------------------------------- planning a run
def example_shapes(exs: list, encoder, image_cfg) -> list[Shape]:
    """Each example's lengths at the training settings: visual tokens from the image headers, text
    by tokenising the prompt with one pad per image, target as the collator builds it."""
    from ..engine.base import Request
    from ..engine.images import plan_tokens

    planned = plan_tokens([e.images for e in exs], image_cfg)
    bad = [e.id for e, p in zip(exs, planned) if p is None]
    if bad:
        raise ValueError(f"cannot read the screenshots of example(s) {', '.join(bad[:5])}"
                         f"{' ...' if len(bad) > 5 else ''}: check the distillation folder's images/")
    reqs = [Request(prompt=e.prompt, images=e.images, suffix=e.suffix) for e in exs]
    ids = encoder.prompt_ids(reqs, [[1] * len(e.images) for e in exs])
    tok = encoder.tokenizer
    targets = tok([e.target for e in exs], add_special_tokens=False)["input_ids"] if exs else []
    return [Shape(text=len(i) - len(e.images), visual=sum(p), target=len(t) + 1, images=len(e.images))
            for e, i, p, t in zip(exs, ids, planned, targets)]


def plan_training(cfg, exs: list, encoder, image_cfg, model_config, device: str,
                  budget: float | None, runtime: float = 0.0) -> dict:
    """The plan for training `cfg` on examples `exs`: lengths, the estimate and whether it fits,
    examples over `max_seq_len`, and changes that would fit when it does not."""
    arch = arch_of(model_config)
    shapes = example_shapes(exs, encoder, image_cfg)
    fp32 = cfg.dtype == "fp32" or (device == "cpu" and cfg.dtype == "auto")
    setting = Setting(dtype_bytes=4 if fp32 else 2, batch_size=cfg.per_device_batch_size, device=device,
                      **{f.name: getattr(cfg, f.name) for f in fields(Setting) if hasattr(cfg, f.name)})
    est = estimate(arch, setting, shapes, runtime)
    plan = {"model": cfg.model, "device": device, "budget_gib": budget / GiB if budget else None,
            "settings": {"max_visual_tokens": cfg.max_visual_tokens, "load_in_4bit": cfg.load_in_4bit,
                         "per_device_batch_size": cfg.per_device_batch_size, "lora_r": cfg.lora_r,
                         "target": cfg.target, "dtype_bytes": setting.dtype_bytes},
            "lengths": length_stats(shapes), "estimate_gib": est.as_gib(), "detail": est.detail,
            "fits": fits(est, budget), "too_long": [
                {"id": e.id, "tokens": x.total, "visual": x.visual, "images": x.images, "text": x.text + x.target}
                for e, x in zip(exs, shapes) if x.total > cfg.max_seq_len],
            "max_seq_len": cfg.max_seq_len, "alternatives": [], "example_lengths": [x.total for x in shapes]}
    if plan["fits"] is False or plan["too_long"]:
        plan["alternatives"] = alternatives(plan, arch, setting, exs, shapes, encoder, image_cfg, cfg, budget, runtime)
    return plan


def alternatives(plan: dict, arch: Arch, setting: Setting, exs: list, shapes: list[Shape], encoder, image_cfg, cfg,
                 budget: float | None, runtime: float) -> list[dict]:
    """Changes that address what is wrong, each with its estimate, whether it fits the memory and its
    longest example: only changes that shorten the examples when they are too long but the memory
    fits, visual-token budgets below the current one, and, when none of the usual budgets brings the
    examples under --max-seq-len, a budget that does (`budget_within`)."""
    def alternative(change: str, s2: Setting, tokens: int | None) -> dict:
        sh = shapes if tokens is None else example_shapes(exs, encoder, replace(image_cfg, max_visual_tokens=tokens))
        e2, longest = estimate(arch, s2, sh, runtime), max(x.total for x in sh)
        return {"change": change, "total_gib": round(e2.total / GiB, 2), "fits": fits(e2, budget),
                "longest": longest, "within_max_seq_len": longest <= plan["max_seq_len"]}

    length_only = plan["fits"] is not False
    current = cfg.max_visual_tokens
    candidates = [("--load-in-4bit", replace(setting, load_in_4bit=True), None),
                  ("--max-visual-tokens 6144", setting, 6144), ("--max-visual-tokens 3072", setting, 3072),
                  ("--load-in-4bit --max-visual-tokens 6144", replace(setting, load_in_4bit=True), 6144),
                  ("--per-device-batch-size 1", replace(setting, batch_size=1), None)]
    out = []
    for change, s2, budget_tokens in candidates:
        shortens = budget_tokens is not None and (current is None or budget_tokens < current)
        # when the memory fits only a smaller budget matters; otherwise any change but none at all
        if (shortens and s2 == setting) if length_only else (shortens or (budget_tokens is None and s2 != setting)):
            out.append(alternative(change, s2, budget_tokens))
    if plan["too_long"] and not any(a["within_max_seq_len"] for a in out):
        tokens = budget_within(exs, shapes, image_cfg, plan["max_seq_len"])
        if tokens is not None and (current is None or tokens < current):
            out.append(alternative(f"--max-visual-tokens {tokens}", setting, tokens))
    return out


def budget_within(exs: list, shapes: list[Shape], image_cfg, cap: int, step: int = 64) -> int | None:
    """A visual-token budget (a multiple of `step`) at which every example is at most `cap` tokens: the room
    the longest text leaves, lowered until the planned images fit; None when the text leaves no room."""
    from ..engine.images import plan_tokens

    room = min(cap - s.text - s.target for s in shapes)
    tokens = room // step * step
    for _ in range(16):
        if tokens < max(step, 4):
            return None
        planned = plan_tokens([e.images for e in exs], replace(image_cfg, max_visual_tokens=tokens))
        over = max(s.text + s.target + sum(p or []) - cap for s, p in zip(shapes, planned))
        if over <= 0:
            return tokens
        tokens -= max(step, -(-over // step) * step)
    return None


def format_plan(plan: dict) -> str:
    """The plan as a few lines a person reads before training."""
    L, est = plan["lengths"], plan["estimate_gib"]
    lines = [f"memory plan for {plan['model']} on {plan['device']} ({L['examples']} training examples)",
             *(textwrap.wrap(f"shapes from: {plan['shapes_from']}", 100, initial_indent="  ",
                             subsequent_indent="    ") if plan.get("shapes_from") else []),
             "  tokens per example      p50      p95      max"]
    lines += [f"    {k:<20} {L[k]['p50']:>8} {L[k]['p95']:>8} {L[k]['max']:>8}" for k in ("text", "visual", "total")]
    lines.append("  estimated peak (GiB): " + ", ".join(f"{k} {v:.2f}" for k, v in est.items()))
    if plan["budget_gib"]:
        verdict = "fits" if plan["fits"] else "does NOT fit"
        lines.append(f"  {verdict} {plan['budget_gib']:.0f} GiB (keeping {GPU_RESERVE / GiB:.1f} GiB for the CUDA "
                     "context and allocator)")
    if plan["too_long"]:
        worst = max(plan["too_long"], key=lambda x: x["tokens"])
        lines.append(f"  {len(plan['too_long'])} example(s) exceed --max-seq-len {plan['max_seq_len']}; longest "
                     f"{worst['id']}: {worst['tokens']} tokens ({worst['visual']} visual in {worst['images']} images, "
                     f"{worst['text']} text)")
    for alt in plan["alternatives"]:
        fit = "" if alt["fits"] is None else " (fits)" if alt["fits"] else " (does not fit)"
        seq = (f" ({'within' if alt['within_max_seq_len'] else 'still over'} --max-seq-len {plan['max_seq_len']})"
               if plan["too_long"] else "")
        lines.append(f"  with {alt['change']}: {alt['total_gib']:.2f} GiB{fit}, longest example {alt['longest']} "
                     f"tokens{seq}")
    if plan["too_long"] and not any(a["within_max_seq_len"] for a in plan["alternatives"]):
        lines.append(f"  no visual-token budget brings every example under --max-seq-len {plan['max_seq_len']}: "
                     "the text alone is too long; raise --max-seq-len, or lower --max-images at collection")
    return "\n".join(lines)


def refusal(plan: dict) -> str | None:
    """Why training should not start (examples too long, or an estimate over the budget) and what
    would fix it; None when it may start."""
    fixes = [a["change"] for a in plan["alternatives"] if a["fits"] is not False and a["within_max_seq_len"]]
    hint = (f" Changes that would fit: {'; '.join(fixes)}." if fixes else
            " Lower --max-visual-tokens further, or use a GPU with more memory.")
    if plan["too_long"]:
        worst = max(plan["too_long"], key=lambda x: x["tokens"])
        return (f"{len(plan['too_long'])} training example(s) are longer than --max-seq-len {plan['max_seq_len']} "
                f"(longest: {worst['id']}, {worst['tokens']} tokens: {worst['visual']} visual in {worst['images']} "
                f"images + {worst['text']} text). Lower --max-visual-tokens (or --max-images at collection), or "
                f"raise --max-seq-len if the memory plan allows it.{hint}")
    if plan["fits"] is False:
        return (f"the memory plan estimates {plan['estimate_gib']['total']:.1f} GiB at peak, over the "
                f"{plan['budget_gib']:.0f} GiB available (less {GPU_RESERVE / GiB:.1f} GiB reserve).{hint} "
                "Pass --force to train anyway.")
    return None
