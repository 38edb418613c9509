"""Shared by the streaming tests (test_stream.py, test_shards.py, test_evaluation_columns.py): a small
synthetic data set with a bad record and a repeated id, the pipeline they score it with, and what they
compare."""
from __future__ import annotations

import json

from adaptrubric_local.dry_run import FakeEngine
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.synth import synthesize

# what depends on which trajectories share a batch (router and cue calls are shared out over a batch)
BATCH_COSTS = ("cost_calls", "cost_tokens")


def _data(tmp_path, n_tasks=6, candidates=3):
    data = synthesize(tmp_path / "d", n_tasks=n_tasks, candidates=candidates, size=(90, 200))
    with open(data, "a") as fh:  # a bad record (missing screenshot) and a repeated id
        fh.write(json.dumps({"id": "bad", "instruction": "x", "steps": [{"screenshot": "nope.png"}]}) + "\n")
        fh.write(open(data).readline())
    return data


def _pipe():
    return AdaptRubric(FakeEngine(), PipelineConfig(router="model", trajectories_per_batch=4))


def _lines(path):
    out = {}
    for line in open(path):
        d = json.loads(line)
        out[d["id"]] = {k: v for k, v in d.items() if k not in BATCH_COSTS}
    return out


# the summary's counts; its cost figures depend on which trajectories shared a batch (BATCH_COSTS), which a
# shard or a resume changes
COUNTS = ("n", "scored", "unparsed", "errors", "positives", "hit_cap", "hit_context")


def truth(i: int) -> int:
    return int(i % 3 != 0)


def labelled_case(root, n=60):
    """(data, verdicts, labels files) with every case the labels rules name: trajectories without a label
    (filled by a file), with a wrong one (overridden by the later file), one a file confirms, one it calls
    unsure, trajectories without a verdict (one labelled by a file), a record that did not load (named in a
    file and holding a verdict line), a retried id, an error line, a verdict without p_success, two
    platforms."""
    from conftest import canonical_record, write_jsonl

    recs = []
    for i in range(n):
        r = canonical_record(root, f"t{i}", 1, instruction=f"Turn on setting {i // 4}.", label=truth(i),
                             platform="android" if i % 2 else "web")
        if i < 5:
            r.pop("label")
        elif i < 10:
            r["label"] = 1 - truth(i)
        recs.append(r)
    recs.insert(7, {"id": "broken", "instruction": "x", "steps": "no"})
    data = write_jsonl(root / "data.jsonl", recs)
    p = {i: round(0.05 + 0.9 * ((i * 37) % 41) / 40, 4) for i in range(n)}
    lines = [{"id": f"t{i}", "status": "ok", "score": int(p[i] >= 0.5), "p_success": p[i], "model": "m",
              "label": 1 - truth(i)} for i in range(n - 6)]  # the last 6 have no verdict
    lines[11] = {"id": "t11", "status": "error", "score": None, "p_success": None, "error": "boom"}
    lines[13].pop("p_success")
    lines += [{"id": "t3", "status": "ok", "score": 1, "p_success": 0.91, "model": "m"},  # retried
              {"id": "broken", "status": "error", "score": None, "error": "did not load"}]
    vfile = write_jsonl(root / "v.jsonl", lines)
    a = write_jsonl(root / "a.jsonl", [{"id": f"t{i}", "label": truth(i)} for i in range(5)]
                    + [{"id": f"t{i}", "label": 1 - truth(i), "note": "first look"} for i in range(5, 10)]
                    + [{"id": "t12", "label": truth(12)}, {"id": "t20", "label": None},
                       {"id": f"t{n - 2}", "label": 1 - truth(n - 2)}, {"id": "broken", "label": 1}])
    b = write_jsonl(root / "b.jsonl", [{"id": f"t{i}", "label": truth(i)} for i in range(5, 10)]
                    + [{"id": f"t{n - 2}", "label": None}])
    return data, vfile, [a, b]
