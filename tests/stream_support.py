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
