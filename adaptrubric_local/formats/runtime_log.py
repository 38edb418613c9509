"""The instruction an OSWorld-style run wrote to its `runtime.log`, for result folders kept without the
checkout's task JSONs (as OS-Copilot/OSReward commits them: `benchmarking_analysis/data/raw/osworld/
kimi-sample/{domain}/{id}/` holds `traj.jsonl`, the screenshots and `runtime.log`, no task JSON).

Read from the writer: OSWorld's `lib_run_single.py` `setup_logger` (fxsc03/OSWorld-main-nex cfe2c9ba11f8,
called first in every `run_single_example*`) adds a bare `logging.FileHandler` on
`{example_result_dir}/runtime.log` to the logger `desktopenv.example.{id}` (no formatter: the file holds
the messages alone, one after another) and hands it to the agent (`agent.reset(runtime_logger)`); the
agent logs, per prediction, an `Instruction:` message with the instruction on the lines after it, then
`Model Output:` and the reply (the kimi-sample's logs; OSReward's
`benchmarking_analysis/benchmark_analysis/adapters.py` `_instr_from_runtime` at b083948 reads the same
block). The first block wins; a one-line `Instruction: TEXT` is read too.

Knows nothing else of the log (the model's replies, timings) and nothing of the run's other files.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

_BLOCK = re.compile(r"Instruction:[ \t]*\n(.*?)\nModel Output:", re.S)
_LINE = re.compile(r"Instruction:[ \t]*(\S.*)")


def instruction_from_runtime_log(folder: str | os.PathLike) -> str | None:
    """The instruction in `folder/runtime.log` (the first `Instruction:` block up to `Model Output:`, else
    the rest of an `Instruction:` line); None when there is no such file or no instruction in it."""
    path = Path(folder) / "runtime.log"
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    m = _BLOCK.search(text) or _LINE.search(text)
    return (m.group(1).strip() or None) if m else None
