"""Loading a Qwen3-VL checkpoint for the transformers engine: a hub id or a local folder through the
same `from_pretrained` path, safetensors only (never `trust_remote_code`), optionally 4/8-bit through
bitsandbytes and with a LoRA adapter through peft (unmerged); the attention implementation
(flash_attention_2 only where transformers itself would run it, else SDPA with a line saying why);
and the hub policy: local files first, one quick reachability check of the hub before any download
(an unreachable hub fails in seconds with the offline recipe), and one-line errors a user can act on.
What `--model` names is checked first (engine/model_path.py). Knows nothing about generation or
batching.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

import torch

from .hf_config import HFEngineConfig
from .model_path import check_model_path

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _dtype(cfg: HFEngineConfig):
    return DTYPES.get(cfg.dtype) or (torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported()
                                     else torch.float32)


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def offline_help(model: str) -> str:
    """How to make a hub id usable without network."""
    return (f"to run offline, download it once where the hub is reachable (`hf download {model}`) and copy the "
            "Hugging Face cache (~/.cache/huggingface/hub, or $HF_HUB_CACHE) to this machine, or save the model "
            "to a folder and pass the folder; set HF_HUB_OFFLINE=1 to never try the network")


FLASH_ATTN_MIN = "2.3.3"  # the oldest flash-attn transformers runs


def flash_attn_2_problem(cuda: bool) -> str | None:
    """Why transformers would not run flash_attention_2 here, or None. Its own rule
    (transformers/utils/import_utils.py, `is_flash_attn_2_available`, 5.24: lines 1324-1339): the
    `flash_attn` module must come from the `flash-attn` distribution (FlashAttention-4 installs under
    the same module name) at version >= 2.3.3, on CUDA; a module that is merely importable is not enough."""
    import importlib.metadata

    from packaging.version import InvalidVersion, Version

    if importlib.util.find_spec("flash_attn") is None:
        return "flash-attn is not installed"
    owners = importlib.metadata.packages_distributions().get("flash_attn", [])
    dists = sorted({d.lower().replace("_", "-") for d in owners})
    if "flash-attn" not in dists:
        return (f"the flash_attn module comes from {', '.join(dists) or 'no installed distribution'}, not from "
                "flash-attn (FlashAttention-2; FlashAttention-4 installs a module of the same name)")
    version = importlib.metadata.version("flash-attn")
    try:
        if Version(version) < Version(FLASH_ATTN_MIN):
            return f"flash-attn {version} is older than {FLASH_ATTN_MIN}, the oldest transformers runs"
    except InvalidVersion:
        return f"flash-attn's version {version!r} cannot be read"
    if cuda:
        from transformers.utils import is_flash_attn_2_available

        if not is_flash_attn_2_available():
            return "transformers' is_flash_attn_2_available() says no"
    return None


def attn_implementation_for(cfg: HFEngineConfig, cuda: bool) -> str:
    attn = cfg.attn_implementation
    why = flash_attn_2_problem(cuda) if attn == "flash_attention_2" or (attn is None and cuda) else None
    if why and attn:
        raise ValueError(f"--attn-implementation flash_attention_2 cannot run: {why} (pip install "
                         f"'flash-attn>={FLASH_ATTN_MIN}' --no-build-isolation, on a CUDA machine); or use sdpa")
    if attn is None and cuda:
        attn = "sdpa" if why else "flash_attention_2"
        if why:
            print(f"attention: sdpa, not flash_attention_2 ({why})", file=sys.stderr)
    if attn is None or attn == "sdpa_padded_prefill":  # the CPU default: see engine/attention.py
        from .attention import register

        attn = register()
    return attn


@contextmanager
def hub_offline():
    """huggingface_hub's offline switch, on for the duration: `local_files_only` alone still lets it
    look up optional files (an adapter config) and its own metadata over the network."""
    from huggingface_hub import constants

    old = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = old


def hub_unreachable(timeout: float = 5.0) -> str | None:
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


def from_pretrained_local_first(load, model: str, local: bool, what: str, **kwargs):
    """`load(model, ...)` from local files first (a folder, or a hub id already in the cache); a hub id
    that is not (fully) cached is downloaded unless the hub is offline or cannot be reached."""
    try:
        with hub_offline():
            return load(model, local_files_only=True, **kwargs)
    except OSError as exc:
        first = _first_line(exc)
    if local:
        raise ValueError(f"cannot load the {what} of {model!r} from its folder: {first}") from None
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        raise ValueError(f"{model}: {what} not found in the local Hugging Face cache ({first}); "
                         + offline_help(model)) from None
    if unreachable := hub_unreachable():
        raise ValueError(f"cannot load the {what} of {model!r}: not in the local Hugging Face cache, and the hub "
                         f"at {unreachable}; {offline_help(model)}") from None
    print(f"{model}: {what} not in the local cache; downloading from the hub (set HF_HUB_OFFLINE=1 to "
          "fail instead on machines without network)", file=sys.stderr)
    try:
        return load(model, local_files_only=False, **kwargs)
    except OSError as exc:
        msg = _first_line(exc)
        if ".bin" in msg or "use_safetensors" in msg:
            raise ValueError(f"{model}: no safetensors weights on the hub ({msg}); this package loads "
                             "safetensors only: convert it (docs/getting-started.md, 'What --model takes') or use a "
                             "safetensors revision") from None
        raise ValueError(f"cannot load the {what} of {model!r}: {msg}; {offline_help(model)}") from None


def load_model(cfg: HFEngineConfig):
    """(model, processor) from a hub id or a local folder, the same path for both. Problems a user can
    fix (no flash-attn, .bin-only weights, a hub id not cached on an offline machine) are ValueErrors
    of one line saying how."""
    from transformers import AutoModelForImageTextToText

    cuda = torch.cuda.is_available()
    if not cuda:
        # masked grouped-query attention: on the CPU the fused path beats repeating K/V per head;
        # transformers keeps it off by default because CUDA's masked GQA hits the math kernel
        os.environ.setdefault("TRANSFORMERS_SDPA_FORCE_GQA", "1")
    local = check_model_path(cfg.model)
    attn = attn_implementation_for(cfg, cuda)
    processor = load_processor(cfg.model, local)
    kwargs = dict(trust_remote_code=False, dtype=_dtype(cfg), use_safetensors=True, attn_implementation=attn)
    if cuda and cfg.device_map:
        kwargs["device_map"] = cfg.device_map
    if cfg.load_in_4bit or cfg.load_in_8bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=cfg.load_in_4bit, load_in_8bit=cfg.load_in_8bit, bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=_dtype(cfg), bnb_4bit_use_double_quant=True,
            llm_int8_skip_modules=["model.visual", "lm_head"])  # quantise the language model only
    model = from_pretrained_local_first(AutoModelForImageTextToText.from_pretrained, cfg.model, local,
                                        "model weights", **kwargs)
    if cfg.adapter:
        model = load_adapter(model, cfg.adapter)
    model.eval()
    return model, processor


def load_processor(model: str, local: bool | None = None):
    """The model's processor (local first, a quick offline failure), after `check_model_path` when
    `local` is not known yet: a folder that is no model is a one-line ValueError before anything loads."""
    from transformers import AutoProcessor

    local = check_model_path(model) if local is None else local
    processor = from_pretrained_local_first(AutoProcessor.from_pretrained, model, local, "processor",
                                            trust_remote_code=False)
    if not hasattr(processor, "image_processor"):
        raise ValueError(f"{model}: AutoProcessor gave {type(processor).__name__}, not a vision processor")
    return processor


def merge_adapter(model: str, adapter: str | Path, out: str | Path, dtype: str = "auto", base=None) -> Path:
    """Merge a peft LoRA adapter into its base and save the checkpoint (safetensors weights, processor)
    to `out`. `base`: the base already loaded (a dequantised 4-bit base, `distill merge`); otherwise
    `model` is loaded unquantised in `dtype`. Knows nothing about how the adapter was trained."""
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText

    local = check_model_path(model)
    if base is None:
        base = from_pretrained_local_first(AutoModelForImageTextToText.from_pretrained, model, local, "model weights",
                                           dtype={"auto": "auto", **DTYPES}[dtype], use_safetensors=True)
    merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
    merged.save_pretrained(out, safe_serialization=True)
    load_processor(model, local).save_pretrained(out)
    return Path(out)


def load_adapter(model, adapter: str):
    """`model` with the LoRA adapter in `adapter` attached (peft), not merged (a 4-bit base cannot take a
    merge), kept in the dtype the base computes in: peft's default float32 adapter makes LoRA's forward
    copy each adapted layer's input to float32 (peft/tuners/lora/layer.py `_cast_input_dtype`)."""
    from peft import PeftModel

    with hub_offline():  # a local folder (checked in HFEngineConfig): nothing to fetch
        model = PeftModel.from_pretrained(model, adapter, is_trainable=False, autocast_adapter_dtype=False)
    dtype = model.get_input_embeddings().weight.dtype
    for name, p in model.named_parameters():
        if ".lora_" in name and p.is_floating_point() and p.dtype != dtype:
            p.data = p.data.to(dtype)
    return model
