"""Machine facts printed by the benchmark scripts next to their numbers (CPU model, cores, load,
library versions), and the median/min/max summary every benchmark reports."""
from __future__ import annotations

import os
import platform
import statistics


def machine() -> str:
    """One line: CPU model, cores, load average, Python, torch and transformers versions."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), model)
    except OSError:
        pass
    load = "/".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    import torch
    import transformers

    return (f"{model}, {os.cpu_count()} cores, load average {load} (1/5/15 min), Python {platform.python_version()}, "
            f"torch {torch.__version__}, transformers {transformers.__version__}")


def spread(values: list[float], fmt: str = ".2f") -> str:
    """'median (min-max, n=k)'."""
    return (f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}}, n={len(values)})")
