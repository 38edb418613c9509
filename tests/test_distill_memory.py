"""Training memory that does not grow with the vocabulary: `distill train` on screen-sized
trajectories (4 x 6 phone screenshots, 1080x2400) with a tiny Qwen3-VL padded to Qwen3-VL's real
151,936-row vocabulary, in a subprocess, peak resident memory at most 3 GB (12.2 GB when the head
runs at every position: `python eval/distill_memory.py --reference`), and the memory plan's
estimate for the same run within 25% of the measurement."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("distill_memory", ROOT / "eval" / "distill_memory.py")
distill_memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(distill_memory)


def test_train_peak_memory_and_the_plan_estimate(tmp_path):
    res = distill_memory.measure(tmp_path)
    lengths = res["plan"]["lengths"]
    assert lengths["examples"] == 4 and lengths["visual"]["max"] > 5000  # long, screen-sized rows
    assert res["plan"]["device"] == "cpu"
    assert res["measured_gb"] <= 3.0, res
    assert 0.75 <= res["measured_gb"] / res["estimate_gb"] <= 1.25, res
    assert distill_memory.check(res) == []  # what the script's exit status says (it exits 1 otherwise)
    assert distill_memory.check({**res, "ratio": 1.3}) and distill_memory.check({**res, "reference": {
        "rc": 137, "error": "killed"}})
