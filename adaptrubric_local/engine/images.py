"""Batched image preprocessing for Qwen3-VL, laid out for throughput: plan each image's target size
from its header with qwen-vl-utils' `smart_resize` (under a pixel cap and an optional visual-token
budget, off by default: the paper ran the processor's own resolution), decode and resize in a thread
pool, patchify into one preallocated uint8 batch tensor; `BatchImages.pixel_values_on` repeats and
normalises on the model's device, giving the Qwen2-VL image processor's exact `pixel_values` /
`image_grid_thw`. A request whose image cannot be read gets an error naming the file; the others are
unaffected. Knows nothing about prompts, tokenizers or models.
"""
from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache, partial
from itertools import accumulate

import torch

from .hf_config import at_least

PIXELS_PER_TOKEN_DEFAULT = 32 * 32


@dataclass
class ImageConfig:
    """Qwen3-VL vision preprocessing settings."""

    patch_size: int = 16
    merge_size: int = 2
    temporal_patch_size: int = 2
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    min_pixels: int = 4 * PIXELS_PER_TOKEN_DEFAULT
    max_pixels: int = 1024 * PIXELS_PER_TOKEN_DEFAULT
    max_visual_tokens: int | None = None  # per request (trajectory); None = no budget (the processor's own)
    workers: int = field(default_factory=lambda: max(1, os.cpu_count() or 1))
    pin_memory: bool = False  # allocate batch tensors in pinned memory (for non-blocking copies to a GPU)

    def __post_init__(self):
        if self.min_pixels > self.max_pixels:
            raise ValueError(f"min_pixels ({self.min_pixels}) > max_pixels ({self.max_pixels})")
        at_least(self, 4, "max_visual_tokens")

    @property
    def factor(self) -> int:
        """Side lengths are multiples of this (patch * merge)."""
        return self.patch_size * self.merge_size

    def tokens(self, size: tuple[int, int]) -> int:
        """Visual tokens of an image resized to `size` (height, width): its patches, merged."""
        h, w = size
        return (h // self.patch_size) * (w // self.patch_size) // self.merge_size ** 2

    @classmethod
    def from_processor(cls, image_processor, **overrides) -> ImageConfig:
        """Read the settings off a loaded Qwen2-VL-style image processor."""
        size = image_processor.size
        get = (lambda k: size.get(k)) if isinstance(size, dict) else (lambda k: getattr(size, k, None))
        kw = dict(patch_size=image_processor.patch_size, merge_size=image_processor.merge_size,
                  temporal_patch_size=image_processor.temporal_patch_size,
                  mean=tuple(image_processor.image_mean), std=tuple(image_processor.image_std))
        for edge, name in (("shortest_edge", "min_pixels"), ("longest_edge", "max_pixels")):
            if get(edge):
                kw[name] = get(edge)
        kw.update(overrides)
        return cls(**kw)


@dataclass
class BatchImages:
    """Preprocessed images of a batch of requests, in request order."""

    patches: torch.Tensor | None  # (sum patches, C*P*P) uint8: one frame, not yet repeated or normalised
    image_grid_thw: torch.Tensor | None  # (n_images, 3) long
    tokens_per_image: list[list[int]]  # per request, visual tokens of each image
    errors: dict[int, str] = field(default_factory=dict)  # request index -> problem
    cfg: ImageConfig | None = None  # normalisation settings (mean, std, temporal patch size)

    def visual_tokens(self, i: int) -> int:
        """Visual tokens of request i."""
        return sum(self.tokens_per_image[i])

    def pixel_values_on(self, device=None, dtype: torch.dtype = torch.float32) -> torch.Tensor | None:
        """The processor's `pixel_values` (sum patches, C*T*P*P), built on `device` from the uint8 patches."""
        if self.patches is None:
            return None
        cfg = self.cfg or ImageConfig()
        x = self.patches.to(device, non_blocking=True) if device is not None else self.patches
        return normalise(x, cfg).to(dtype)

    @property
    def pixel_values(self) -> torch.Tensor | None:
        """`pixel_values_on` the CPU, as float32 (what transformers' processor returns)."""
        return self.pixel_values_on(None)


@lru_cache(maxsize=8192)
def _header_size(path: str, mtime_ns: int) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as im:
        w, h = im.size
    return h, w


def image_size(path: str) -> tuple[int, int]:
    """(height, width) from the file header, without decoding the pixels (cached per file version)."""
    return _header_size(path, os.stat(path).st_mtime_ns)


def target_sizes(sizes: list[tuple[int, int]], cfg: ImageConfig) -> list[tuple[int, int]]:
    """smart_resize targets for one request's images under the per-image and per-request caps, each
    taken through the processor's own bounds once more (flooring to a budget can fall under
    `min_pixels`), so an image resized here is one the processor leaves as it is."""
    from qwen_vl_utils.vision_process import smart_resize

    cap = cfg.max_pixels
    if cfg.max_visual_tokens is not None and sizes:
        per_image_tokens = cfg.max_visual_tokens // len(sizes)
        cap = max(cfg.min_pixels, min(cap, per_image_tokens * cfg.factor * cfg.factor))
    fit = partial(smart_resize, factor=cfg.factor, min_pixels=cfg.min_pixels)
    return [fit(*fit(h, w, max_pixels=cap), max_pixels=cfg.max_pixels) for h, w in sizes]


def decode_resize(path: str, size: tuple[int, int]) -> torch.Tensor:
    """Decode an image to RGB uint8 (C, H, W) and resize it (bicubic, antialiased) to `size`."""
    import warnings

    from torchvision.io import ImageReadMode, decode_image, read_file
    from torchvision.transforms.v2 import InterpolationMode
    from torchvision.transforms.v2 import functional as tvF

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torchvision 0.29 points to torchcodec
            img = decode_image(read_file(path), mode=ImageReadMode.RGB)
    except RuntimeError:  # formats torchvision cannot decode: fall back to PIL
        import numpy as np
        from PIL import Image

        with Image.open(path) as im:
            img = torch.from_numpy(np.asarray(im.convert("RGB")).copy()).permute(2, 0, 1)
    if tuple(img.shape[-2:]) != tuple(size):
        img = tvF.resize(img, list(size), interpolation=InterpolationMode.BICUBIC, antialias=True)
    return img


def resized_images(paths: list[str], sizes: list[tuple[int, int]]) -> list:
    """PIL images of `paths`, decoded and resized to `sizes` by `decode_resize`."""
    from PIL import Image

    return [Image.fromarray(decode_resize(p, s).permute(1, 2, 0).numpy()) for p, s in zip(paths, sizes)]


_NORM_CACHE: dict = {}


def normalise(patches: torch.Tensor, cfg: ImageConfig) -> torch.Tensor:
    """uint8 patches (rows, C*P*P) -> the processor's float32 pixel values (rows, C*T*P*P): each
    frame repeated T times, then `(x / 255 - mean) / std`, on whatever device `patches` is on."""
    rows, cols = patches.shape
    c = cols // (cfg.patch_size * cfg.patch_size)
    t = cfg.temporal_patch_size
    key = (cfg.mean, cfg.std, t, cfg.patch_size, c, str(patches.device))
    if key not in _NORM_CACHE:  # per column, x * scale - offset == (x / 255 - mean) / std
        std, mean = (torch.tensor(v, dtype=torch.float32)[:c].repeat_interleave(t * cols // c)
                     for v in (cfg.std, cfg.mean))
        _NORM_CACHE[key] = ((1.0 / (255.0 * std)).to(patches.device), (mean / std).to(patches.device))
    scale, offset = _NORM_CACHE[key]
    x = patches.view(rows, c, 1, -1).expand(rows, c, t, cols // c).float().reshape(rows, c * t * (cols // c))
    return x.mul_(scale).sub_(offset)


def patchify(images: torch.Tensor, cfg: ImageConfig, out: torch.Tensor | None = None) -> torch.Tensor:
    """uint8 patches (N * gh * gw, C * P * P) of same-size uint8 images (N, C, H, W), in the Qwen2-VL
    image processor's patch order (one frame; `normalise` makes the processor's values); writes into
    `out` when given."""
    n, c, h, w = images.shape
    p, m = cfg.patch_size, cfg.merge_size
    if out is None:
        out = torch.empty(n * (h // p) * (w // p), c * p * p, dtype=torch.uint8)
    view = images.reshape(n, c, h // p // m, m, p, w // p // m, m, p).permute(0, 2, 5, 3, 6, 1, 4, 7)
    out.view(view.shape).copy_(view)
    return out


class ImagePipeline:
    """Thread-pooled decode/resize/patchify into one batch tensor; `submit` runs in the background."""

    def __init__(self, cfg: ImageConfig | None = None):
        self.cfg = cfg or ImageConfig()
        self._pool = ThreadPoolExecutor(max_workers=self.cfg.workers, thread_name_prefix="img")
        self._bg = ThreadPoolExecutor(max_workers=1, thread_name_prefix="img-batch")

    def close(self) -> None:
        """Stop the worker threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._bg.shutdown(wait=False, cancel_futures=True)

    def submit(self, requests: list[list[str]]) -> Future:
        """Start preprocessing in the background; the Future yields a BatchImages."""
        return self._bg.submit(self.process, requests)

    def process(self, requests: list[list[str]]) -> BatchImages:
        """Preprocess every request's images (a list of paths per request)."""
        cfg = self.cfg
        errors: dict[int, str] = {}
        plans: list[list[tuple[int, int]]] = []
        for i, paths in enumerate(requests):
            try:
                plans.append(self.plan(paths))
            except ValueError as exc:  # missing or unreadable file, absurd aspect ratio
                errors[i] = str(exc)
                plans.append([])
        # every image's rows in one preallocated tensor, known before any pixel is decoded
        order = [(i, j) for i in range(len(requests)) if i not in errors for j in range(len(requests[i]))]
        p = cfg.patch_size
        starts = [0, *accumulate((plans[i][j][0] // p) * (plans[i][j][1] // p) for i, j in order)]
        with torch.inference_mode(False):  # worker threads write into it in place, whatever the caller's mode
            out = torch.empty(starts[-1], 3 * p ** 2, dtype=torch.uint8,
                              pin_memory=cfg.pin_memory and torch.cuda.is_available())
        jobs = {(i, j): self._pool.submit(self._one, requests[i][j], plans[i][j], out[starts[n]:starts[n + 1]])
                for n, (i, j) in enumerate(order)}
        for (i, j), fut in jobs.items():
            try:
                fut.result()
            except Exception as exc:
                errors.setdefault(i, f"{requests[i][j]}: cannot decode image ({exc})")
        keep = [n for n, (i, _) in enumerate(order) if i not in errors]
        tokens: list[list[int]] = [[] for _ in requests]
        grids = []
        for i, j in (order[n] for n in keep):
            h, w = plans[i][j]
            grids.append((1, h // p, w // p))
            tokens[i].append(cfg.tokens((h, w)))
        if not keep:
            return BatchImages(None, None, tokens, errors, cfg)
        if len(keep) < len(order):  # drop the rows of failed requests (rare: costs one copy)
            out = torch.cat([out[starts[n]:starts[n + 1]] for n in keep])
            if cfg.pin_memory and torch.cuda.is_available():
                out = out.pin_memory()
        return BatchImages(out, torch.tensor(grids, dtype=torch.long), tokens, errors, cfg)

    def plan(self, paths: list[str]) -> list[tuple[int, int]]:
        """Target sizes for one request, or ValueError naming the image that cannot be used."""
        sizes = []
        for p in paths:
            if not os.path.isfile(p):
                raise ValueError(f"{p}: image not found")
            try:
                sizes.append(image_size(p))
            except Exception as exc:
                raise ValueError(f"{p}: cannot read image ({type(exc).__name__}: {exc})") from None
            h, w = sizes[-1]
            if max(h, w) > 200 * max(1, min(h, w)):
                raise ValueError(f"{p}: aspect ratio {max(h, w) / max(1, min(h, w)):.0f}:1 ({w}x{h}) is beyond "
                                 "Qwen3-VL's limit of 200:1")
        return target_sizes(sizes, self.cfg)

    def _one(self, path: str, size: tuple[int, int], out: torch.Tensor) -> None:
        patchify(decode_resize(path, size).unsqueeze(0), self.cfg, out)


def pipeline_for(processor, config, **extra) -> ImagePipeline:
    """The pipeline on `processor`'s image settings under an engine config's `image_workers`,
    `max_visual_tokens` and `max_pixels` (when set), with `extra` settings."""
    overrides = {"workers": config.image_workers, "max_visual_tokens": config.max_visual_tokens, **extra}
    if config.max_pixels:
        overrides["max_pixels"] = config.max_pixels
    return ImagePipeline(ImageConfig.from_processor(processor.image_processor, **overrides))


def plan_tokens(requests: list[list[str]], cfg: ImageConfig) -> list[list[int] | None]:
    """Visual tokens of each image of each request from the headers alone (None for a request whose
    images cannot be planned), so that prompts can be tokenized while the pixels are decoded."""
    out: list[list[int] | None] = []
    for paths in requests:
        try:
            out.append([cfg.tokens(size) for size in target_sizes([image_size(p) for p in paths], cfg)])
        except Exception:  # ImagePipeline.process reports it
            out.append(None)
    return out
