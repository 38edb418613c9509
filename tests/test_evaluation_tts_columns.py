"""`tts` over columns (evaluation/tts_columns.py) against `tts` over Verdict and Trajectory objects: the same
tts.json on the same files, and few bytes a candidate."""
from __future__ import annotations

import json

import pytest
from stream_support import _data

from adaptrubric_local.dry_run import FakeEngine
from adaptrubric_local.evaluation import harness, metrics, tts, tts_columns
from adaptrubric_local.evaluation.harness import run_tts
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.labelled_stream import LabelledStream
from adaptrubric_local.labels import apply_labels
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.scoring import score_file

from conftest import canonical_record, write_jsonl


def _without_created(res: dict) -> dict:
    return {**res, "run": {k: v for k, v in res["run"].items() if k != "created"}}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """Data of 8 tasks x 4 candidates, two of them grouped by instruction (no task_id), one unlabelled, a
    record that does not load and a repeated id; verdicts with an error, a missing candidate, an extra id, a
    stale error line, an unparsed line that keeps a score, a retried line and calibrated probabilities."""
    tmp = tmp_path_factory.mktemp("tts_columns")
    data = _data(tmp, n_tasks=8, candidates=4)
    lines = data.read_text().splitlines()
    for k, line in enumerate(lines[:-2]):
        d = json.loads(line)
        if d["task_id"] in ("t002", "t005"):  # grouped by their instruction
            d.pop("task_id")
        if k == 3:
            d.pop("label", None)
        lines[k] = json.dumps(d)
    lines.append(json.dumps({"id": "broken", "steps": [{"action": "x"}]}))  # no instruction: does not load
    data.write_text("\n".join(lines) + "\n")
    vfile = tmp / "v.jsonl"
    failing = FakeEngine(fail=lambda r: "boom" if r.kind == "verify" and r.tag == "t001_c0" else None)
    score_file(AdaptRubric(failing, PipelineConfig(router="model", trajectories_per_batch=4)), data, vfile,
               progress=False)
    vl = [json.loads(x) for x in vfile.read_text().splitlines()]
    extra = vl[0] | {"id": "not-in-data"}
    stale = vl[1] | {"id": "gone", "status": "error", "score": None}
    unparsed = vl[5] | {"status": "unparsed", "score": 1}
    again = vl[3] | {"p_success_calibrated": 0.25}
    vl = [v | {"p_success_calibrated": round(0.1 + 0.8 * (k % 7) / 7, 3)} for k, v in enumerate(vl)]
    rows = [*(v for v in [*vl[:5], unparsed, *vl[6:]] if v["id"] != "t006_c2"), extra, stale, again]
    write_jsonl(vfile, rows)
    labels = write_jsonl(tmp / "labels.jsonl", [{"id": json.loads(lines[k])["id"], "label": k % 2}
                                                for k in (0, 3, 9, 14)] + [{"id": "broken", "label": 1}])
    return data, vfile, labels


@pytest.mark.parametrize("seed", [42, None, 7])
@pytest.mark.parametrize("subset", ["data", "verdicts"])
def test_tts_over_columns_writes_the_tts_json_of_tts_over_objects(case, tmp_path, seed, subset):
    data, vfile, _labels = case
    old = run_tts(vfile, tmp_path / "old", data, seed=seed, loaded=load_trajectories(data, check_images=False),
                  subset=subset, allow_extra=True)
    new = run_tts(vfile, tmp_path / "new", data, seed=seed, subset=subset, allow_extra=True)
    cov = new["coverage"]
    assert cov["extra"] == ["not-in-data"] and cov["stale_errors"] == ["gone"] and "broken" in cov["not_loaded"]
    assert bool(cov["missing"]) and new["pool"]["errors"] and new["pool"]["unparsed"]
    assert new["pool"]["missing"] == (1 if subset == "data" else 0)
    assert new["pool"]["tasks"] == 8 and new["pool"]["trials_per_task"] == {"min": 3, "max": 4}
    assert _without_created(new) == _without_created(old)
    files = [json.loads((tmp_path / d / "tts.json").read_text()) for d in ("old", "new")]
    assert _without_created(files[0]) == _without_created(files[1])


def test_tts_over_columns_without_data_and_with_labels(case, tmp_path):
    data, vfile, labels = case
    verdicts = harness.load_verdicts(vfile)  # no data: the verdicts' own labels and task ids
    want = tts.curves(verdicts)
    want["classification"] = metrics.classification([v for v in verdicts if v.label in (0, 1)])
    alone = run_tts(vfile, tmp_path / "alone")
    assert alone["coverage"]["labels"] == "verdicts" and {k: alone[k] for k in want} == want
    loaded = load_trajectories(data, check_images=False)
    record = apply_labels(loaded, [labels], str(data)).record()
    old = run_tts(vfile, tmp_path / "o", data, loaded=loaded, labels=record, allow_extra=True)
    stream = LabelledStream(data, [labels])
    new = run_tts(vfile, tmp_path / "n", data, stream=stream, allow_extra=True)
    assert new["run"]["labels"] == record and record["filled"] == 1 and record["not_loaded"] == 1
    assert _without_created(new) == _without_created(old)
    assert stream.applied().summary() == apply_labels(load_trajectories(data, check_images=False), [labels],
                                                      str(data)).summary()


def test_instruction_keys_group_as_the_objects_do(tmp_path):
    """Records without a task_id are grouped by their instruction (kept as a digest of "instruction: " and
    the text, the object path's task_id): two instructions, two tasks; a record whose task_id is that very
    string joins its group, as it does over objects."""
    recs = [canonical_record(tmp_path, f"c{i}", 1, instruction=f"Do {i % 2}.", label=int(i % 3 == 0))
            for i in range(6)]
    recs.append(canonical_record(tmp_path, "k", 1, instruction="Other.", task_id="instruction: Do 0.", label=1))
    recs.append(canonical_record(tmp_path, "z", 1, instruction="Do 1.", task_id="Do 1.", label=0))
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    vfile = write_jsonl(tmp_path / "v.jsonl", [{"id": r["id"], "status": "ok", "score": k % 2, "p_success": 0.5}
                                               for k, r in enumerate(recs)])
    old = run_tts(vfile, tmp_path / "o", data, loaded=load_trajectories(data, check_images=False))
    new = run_tts(vfile, tmp_path / "n", data)
    assert _without_created(new) == _without_created(old)
    assert new["pool"]["tasks"] == 3 and new["pool"]["trials_per_task"] == {"min": 1, "max": 4}


def test_tts_over_columns_holds_few_bytes_a_candidate(tmp_path):
    """Peak traced memory of the curves of 20,000 verdict lines over their data (tasks of 8) stays under
    200 bytes a candidate: the columns, not Verdict and Trajectory objects (some kilobytes each)."""
    import tracemalloc

    n = 20000
    data, vfile = tmp_path / "d.jsonl", tmp_path / "v.jsonl"
    with open(data, "w") as fd, open(vfile, "w") as fv:
        for i in range(n):
            fd.write(json.dumps({"id": f"t{i:07d}", "instruction": f"Task {i // 8} with a long instruction " * 4,
                                 "task_id": f"task{i // 8}", "label": (i // 3) % 2,
                                 "steps": [{"screenshot": "s.png", "action": f"click({i}, {s})", "thought": "x" * 200}
                                           for s in range(8)]}) + "\n")
            fv.write(json.dumps({"id": f"t{i:07d}", "status": "ok", "score": i % 2, "p_success": (i % 97) / 97,
                                 "model": "m"}) + "\n")
    tracemalloc.start()
    try:
        res, _ = tts_columns.curves(vfile, LabelledStream(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res["pool"]["tasks"] == n // 8 and res["classification"]["n"] == n
    assert peak / n < 200, f"{peak / n:.0f} bytes a candidate"


@pytest.mark.parametrize("fmt", ["androidgen", "zerogui", "osreward", "clawgui"])
def test_a_folder_format_is_loaded_whole_and_gives_the_same_curves(fmt, tmp_path):
    from conftest import make_dataset

    data, tid = make_dataset(fmt, tmp_path / "d")
    labels = write_jsonl(tmp_path / "l.jsonl", [{"id": tid, "label": 1}])
    vfile = write_jsonl(tmp_path / "v.jsonl", [{"id": tid, "status": "ok", "score": 1, "p_success": 0.9}])
    loaded = load_trajectories(data, fmt=fmt, check_images=False)
    record = apply_labels(loaded, [labels], str(data)).record()
    old = run_tts(vfile, tmp_path / "o", data, loaded=loaded, labels=record)
    new = run_tts(vfile, tmp_path / "n", data, stream=LabelledStream(data, [labels], fmt=fmt))
    assert _without_created(new) == _without_created(old) and new["oracle"] == {1: 100.0}
