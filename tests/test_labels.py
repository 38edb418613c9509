"""Labels files (what the review page exports) and the one step that applies them: the strict schema
(an unknown key, a wrong type or a malformed line names the file, line and field), a later line and a
later file winning per id, unsure lines that give no label, ids outside the data refused by name, and
data folders that hold a labels file (skipped, never read as trajectories)."""

import pytest

from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.labelled_stream import apply_labels
from adaptrubric_local.labels import LabelsError, merged_labels, read_labels, write_labels

from conftest import canonical_record, write_jsonl


def test_a_page_export_reads_into_the_schema(tmp_path):
    f = write_jsonl(tmp_path / "labels.jsonl", [
        {"id": "t1", "label": 1, "note": "<script>x</script>", "score": 0, "p_success": 0.31,
         "time": "2026-05-01T09:12:03.120Z", "data": "d.jsonl", "verdicts": "v.jsonl"},
        {"id": 7, "label": None, "note": None, "score": None, "p_success": None, "time": None, "data": None,
         "verdicts": None},
        "",
        {"id": "t1", "label": 0}])  # a correction appended later wins
    lf = read_labels(f)
    assert list(lf.records) == ["7", "t1"] and lf.records["t1"].label == 0 and lf.lines["t1"] == 4
    assert lf.records["7"].label is None and lf.n_lines == 3
    assert lf.provenance == {"path": str(f), "sha256": lf.sha256, "lines": 3, "ids": 2, "labels": 1, "unsure": 1}
    import hashlib

    assert lf.sha256 == hashlib.sha256(f.read_bytes()).hexdigest()
    again = write_labels(lf.records.values(), tmp_path / "again.jsonl")
    assert {i: r.label for i, r in read_labels(again).records.items()} == {"7": None, "t1": 0}


@pytest.mark.parametrize("line, where, problem", [
    ('{"id": "a", "label": 1, "colour": "red"}', "line 2, field 'colour'", "unknown key"),
    ('{"id": "a"}', "line 2, field 'label'", "required field missing"),
    ('{"id": "a", "label": 2}', "line 2, field 'label'", "must be 0, 1 or null"),
    ('{"id": "a", "label": true}', "line 2, field 'label'", "must be 0, 1 or null"),
    ('{"id": "a", "label": 1.0}', "line 2, field 'label'", "must be 0, 1 or null"),
    ('{"id": "", "label": 1}', "line 2, field 'id'", "non-empty string"),
    ('{"id": "a", "label": 1, "p_success": 1.5}', "line 2, field 'p_success'", "from 0 to 1"),
    ('{"id": "a", "label": 1, "note": 5}', "line 2, field 'note'", "must be a string"),
    ('{"id": "a", "label": 1', "line 2", "malformed JSON"),
    ('["a", 1]', "line 2", "expected a JSON object"),
    ('{"id": "a", "status": "ok", "score": 1}', "line 2", "looks like a verdict file"),
])
def test_a_bad_line_names_file_line_and_field(tmp_path, line, where, problem):
    f = write_jsonl(tmp_path / "l.jsonl", ['{"id": "ok", "label": 1}', line])
    with pytest.raises(LabelsError) as e:
        read_labels(f)
    assert str(e.value).startswith(f"{f}: {where}") and problem in str(e.value)


def test_an_empty_or_missing_file_is_an_error(tmp_path):
    with pytest.raises(LabelsError, match="no labels"):
        read_labels(write_jsonl(tmp_path / "e.jsonl", ["", " "]))
    with pytest.raises(LabelsError, match="cannot read"):
        read_labels(tmp_path / "nope.jsonl")


@pytest.fixture
def data(tmp_path):
    recs = [canonical_record(tmp_path, f"t{i}", 2, label=[1, 0, None, 1][i]) for i in range(4)]
    recs.append({"id": "bad", "instruction": "x", "steps": "not a list"})
    return write_jsonl(tmp_path / "d.jsonl", recs)


def test_apply_fills_overrides_and_leaves_unsure_alone(data, tmp_path):
    loaded = load_trajectories(data)
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": "t0", "label": 0}, {"id": "t1", "label": 0}, {"id": "t2", "label": 1},
                                      {"id": "t3", "label": None}, {"id": "bad", "label": 1}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "t0", "label": 1}, {"id": "t2", "label": None}])
    applied = apply_labels(loaded, [a, b])
    labels = {t.id: t.label for t in loaded.trajectories}
    # t0: b's 1 wins over a's 0 (the data's 1 again); t1 confirmed; t2: a fills it, b's unsure keeps a's 1;
    # t3: unsure leaves the data's 1; "bad" is a record of the data that did not load
    assert labels == {"t0": 1, "t1": 0, "t2": 1, "t3": 1}
    assert (applied.filled, applied.overridden, applied.confirmed, applied.unsure) == (1, 0, 2, 1)
    assert applied.not_loaded == ["bad"]
    assert [f["sha256"] for f in applied.record()["files"]] == [read_labels(a).sha256, read_labels(b).sha256]
    assert "1 filled" in applied.summary() and "1 unsure (keeps the data's label 1)" in applied.summary()
    assert applied.record()["unsure_kept"] == {"1": 1}
    assert merged_labels([read_labels(b), read_labels(a)])["t0"] == 0  # the order of the files decides


def test_an_id_outside_the_data_is_refused_by_name(data, tmp_path):
    loaded = load_trajectories(data)
    f = write_jsonl(tmp_path / "l.jsonl",
                    [{"id": "t0", "label": 1}, {"id": "zz", "label": 1}, {"id": "yy", "label": 0}])
    with pytest.raises(LabelsError) as e:
        apply_labels(loaded, [f], data_name=str(data))
    assert str(e.value).startswith(f"{f}: line 2: id 'zz' is not in {data} (and 1 more: yy)")
    assert loaded.trajectories[0].label == 1  # nothing applied


def test_a_data_folder_skips_a_labels_file_and_refuses_one_given_as_data(tmp_path):
    recs = [canonical_record(tmp_path, "t0", 2, label=1)]
    write_jsonl(tmp_path / "d.jsonl", recs)
    lab = write_jsonl(tmp_path / "labels.jsonl", [{"id": "t0", "label": 0, "note": None}])
    loaded = load_trajectories(tmp_path)
    assert [t.id for t in loaded.trajectories] == ["t0"] and not loaded.errors
    assert any("labels.jsonl: this looks like a labels file" in w for w in loaded.warnings)
    with pytest.raises(ValueError, match="looks like a labels file"):
        load_trajectories(lab)


def test_unsure_says_what_label_each_trajectory_keeps(data, tmp_path):
    """An unsure line leaves the data's label: the summary says which (not "no label" when the data has one)."""
    def applied(lines):
        return apply_labels(load_trajectories(data), [write_jsonl(tmp_path / "u.jsonl", lines)])

    none = applied([{"id": "t2", "label": None}])
    assert "1 unsure (no label: the data has none)" in none.summary()
    two = applied([{"id": "t0", "label": None}, {"id": "t3", "label": None}])
    assert "2 unsure (keep the data's label 1)" in two.summary()
    mixed = applied([{"id": i, "label": None} for i in ("t0", "t1", "t2", "t3")])
    assert "4 unsure (the data's labels kept: 2 of 1, 1 of 0, 1 none)" in mixed.summary()
    assert mixed.record()["unsure_kept"] == {"1": 2, "0": 1, "none": 1}


def test_the_export_line_the_docs_show_is_a_labels_file_line(tmp_path):
    """docs/evaluation.md shows one line of the review page's Export: it must read as a labels file."""
    import re
    from pathlib import Path

    from adaptrubric_local.labels import merged_labels, read_labels

    text = (Path(__file__).resolve().parents[1] / "docs" / "evaluation.md").read_text()
    block = re.search(r"```json\n\s*(\{.*?\})\n\s*```", text, re.S)
    assert block, "no json block in docs/evaluation.md"
    path = tmp_path / "labels.jsonl"
    path.write_text(block.group(1) + "\n")
    assert merged_labels([read_labels(path)]) == {"1720533256": 0}


def _androidgen_folder(root, ids):
    """An AndroidGen folder (`<root>/<trace_id>/record.jsonl` + screenshots) with its own labels.jsonl,
    keyed by trace_id and holding notes of its own, as AndroidGen's data sets ship it."""
    import json

    from conftest import make_png

    for k, tid in enumerate(ids):
        rows = []
        for i in range(2):
            make_png(root / tid / "screenshots" / f"{i}.png", 10 * k + i)
            pa = {"operation": "do", "action": "Click", "kwargs": {"element_id": "3"}} if i == 0 else \
                {"operation": "exit", "kwargs": {"message": "done"}}
            rows.append(json.dumps({"instruction": "Turn on Wi-Fi.", "index": i, "trace_id": int(tid),
                                    "image": f"{tid}/screenshots/{i}.png", "parsed_action": pa}))
        (root / tid / "record.jsonl").write_text("\n".join(rows) + "\n")
    lines = [{"trace_id": tid, "label": k % 2, "confidence": "high", "family": "toggle", "why": f"case {k}"}
             for k, tid in enumerate(ids)]
    (root / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root / "labels.jsonl"


def test_androidgens_own_labels_file_is_taken_by_labels_as_the_loader_reads_it(tmp_path):
    ids = ["1720533256", "1720594731", "1720596994"]
    labels = _androidgen_folder(tmp_path / "ag", ids)
    loaded = load_trajectories(tmp_path / "ag")
    assert {t.id: t.label for t in loaded.trajectories} == {ids[0]: 0, ids[1]: 1, ids[2]: 0}
    f = read_labels(labels)  # was: "field 'id': required field missing"
    assert {i: r.label for i, r in f.records.items()} == {ids[0]: 0, ids[1]: 1, ids[2]: 0}
    for t in loaded.trajectories:
        t.label = None
    applied = apply_labels(loaded, [labels], data_name=str(tmp_path / "ag"))
    assert applied.filled == 3 and {t.id: t.label for t in loaded.trajectories} == {ids[0]: 0, ids[1]: 1, ids[2]: 0}


def test_a_bad_androidgen_labels_line_names_its_trace_id_field(tmp_path):
    bad = write_jsonl(tmp_path / "labels.jsonl", [{"trace_id": "t1", "label": 1}, {"trace_id": [3], "label": 0}])
    with pytest.raises(LabelsError, match=r"labels.jsonl: line 2, field 'trace_id': must be a non-empty string"):
        read_labels(bad)
    bad = write_jsonl(tmp_path / "l2.jsonl", [{"trace_id": "t1"}])
    with pytest.raises(LabelsError, match=r"line 1, field 'label': required field missing"):
        read_labels(bad)
    # a line with an id is a labels line: its keys are checked as always (a trace_id there is unknown)
    bad = write_jsonl(tmp_path / "l3.jsonl", [{"id": "t1", "trace_id": "t1", "label": 1}])
    with pytest.raises(LabelsError, match=r"field 'trace_id': unknown key"):
        read_labels(bad)


def test_an_androidgen_judge_database_is_read_as_labels(tmp_path):
    """model/judge/judge.py L108-136: episode entries keyed by folder with `complete`, sub-goal entries with
    `step` (not episodes)."""
    import json
    db = {"1720533256": {"env": "android", "task": "t", "complete": True, "record": "./episodes/1720533256",
                         "conditions": [["a", 0]]},
          "1720594731": {"env": "android", "task": "t", "complete": False, "record": "./episodes/1720594731"},
          "1720533256-0": {"env": "android", "task": "a", "complete": True, "step": 0}}
    path = tmp_path / "judged" / "database.json"  # not beside the episodes: the loader does not find it
    path.parent.mkdir()
    path.write_text(json.dumps(db, indent=4))
    f = read_labels(path)
    assert {i: r.label for i, r in f.records.items()} == {"1720533256": 1, "1720594731": 0}
    assert f.provenance["ids"] == 2
    ids = ["1720533256", "1720594731"]
    _androidgen_folder(tmp_path / "ag", ids)
    (tmp_path / "ag" / "labels.jsonl").unlink()
    loaded = load_trajectories(tmp_path / "ag")
    assert {t.label for t in loaded.trajectories} == {None}
    apply_labels(loaded, [path], data_name="ag")
    assert {t.id: t.label for t in loaded.trajectories} == {"1720533256": 1, "1720594731": 0}
