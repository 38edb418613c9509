"""The demo flow (demo.py, what `make demo` runs): synthetic data, a tiny student distilled from the
labels, then base and adapter evaluated on held-out tasks, at its smallest size (about 6 s on 2 cores).
The quality `make demo` checks (agreement >= 90%) needs its full size and is not asserted here."""
import json
import re

from adaptrubric_local.cli.demo import DemoSettings, distill_demo


def test_the_demo_writes_every_artefact_and_a_comparison(tmp_path, capfd):
    logged = []
    res = distill_demo(tmp_path, DemoSettings(n_tasks=4, candidates=2, epochs=1.0, max_new_tokens=8),
                       log=logged.append)
    assert json.loads((tmp_path / "demo.json").read_text())["table"] == res["table"]
    assert set(res["table"]) >= {"agreement_with_teacher", "acc", "f1", "unparsed", "n"}
    for run in ("base", "adapter"):
        assert 0.0 <= res["table"]["agreement_with_teacher"][run] <= 1.0
        assert (tmp_path / "eval" / run / "report.md").is_file()
    assert (tmp_path / "eval" / "comparison.md").is_file()
    assert (tmp_path / "checkpoints" / "tiny-student" / "adapter_config.json").is_file()
    assert [line.split(":")[0] for line in logged[:4]] == ["data", "collect", "train", "evaluate (held-out tasks)"]
    assert set(res["times"]) == {"data_s", "collect_s", "train_s", "evaluate_s"}
    out, err = capfd.readouterr()  # the trainer's log dicts are not printed (`adaptrubric --verbose demo` shows them)
    assert not re.search(r"\{'(loss|eval_loss|train_runtime|epoch)'", out + err), (out + err)[-2000:]
