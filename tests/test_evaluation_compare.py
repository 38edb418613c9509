"""`adaptrubric compare` (evaluation/compare.py): two result folders side by side."""
import json

import pytest

from adaptrubric_local import Verdict
from adaptrubric_local.evaluation import compare, harness


def V(id, label, score=None, status="ok"):
    return Verdict(id=id, label=label, score=score if status == "ok" else None, status=status, platform="android",
                   prompt_tokens=50, completion_tokens=5, n_images=2)


def _write(path, verdicts):
    path.write_text("".join(json.dumps(v.to_dict()) + "\n" for v in verdicts))
    return path


def test_compare_files_old_metrics_as_scored_only(tmp_path):
    vs = [V("a", 1, 1), V("b", 0, 0), V("c", 1, status="unparsed")]
    harness.run_eval(_write(tmp_path / "v.jsonl", vs), tmp_path / "new")
    old = json.loads((tmp_path / "new" / "metrics.json").read_text())
    # a metrics.json from before: overall held the scored-only figures and no scored_only block
    legacy = {**old, "overall": {k: v for k, v in old["overall"].items() if k != "scored_only"}}
    legacy["overall"].update(acc=100.0, f1=100.0)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "metrics.json").write_text(json.dumps(legacy))
    rows = {line.split()[0]: line.split()[1:] for line in compare.compare(tmp_path / "old",
                                                                          tmp_path / "new").splitlines()
            if line.startswith("overall.")}
    assert rows["overall.scored_only.acc"] == ["100.00", "100.00", "+0.00"]
    assert rows["overall.acc"][0] == "-" and rows["overall.acc"][1] == f"{200 / 3:.2f}"


def test_compare_marks_the_settings_that_differ_and_refuses_two_kinds(tmp_path):
    harness.run_eval(_write(tmp_path / "a.jsonl", [V("a", 1, 1), V("b", 0, 1)]), tmp_path / "A")
    harness.run_eval(_write(tmp_path / "b.jsonl", [V("a", 1, 1), V("b", 0, 0)]), tmp_path / "B")
    run = json.loads((tmp_path / "B" / "metrics.json").read_text())
    run["run"]["model"] = "another-model"
    (tmp_path / "B" / "metrics.json").write_text(json.dumps(run))
    text = compare.compare(tmp_path / "A", tmp_path / "B", out=tmp_path / "both")
    model = next(line for line in text.splitlines() if line.startswith("model "))
    assert model.endswith("<- differs") and "another-model" in model
    acc = next(line.split() for line in text.splitlines() if line.startswith("overall.acc "))
    assert acc[1:] == ["50.00", "100.00", "+50.00"]
    (tmp_path / "T").mkdir()
    (tmp_path / "T" / "tts.json").write_text("{}")
    with pytest.raises(ValueError, match="cannot compare metrics.json"):
        compare.compare(tmp_path / "A", tmp_path / "T")
