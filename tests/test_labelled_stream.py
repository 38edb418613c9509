"""Labels files put on a data set as it streams, or on it loaded whole (labelled_stream.py): the labels,
counts, messages and errors worked out by hand."""
import json

import pytest

from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.labelled_stream import LabelledStream, apply_labels
from adaptrubric_local.labels import LabelsError
from adaptrubric_local.types import Trajectory

from conftest import canonical_record, write_jsonl


@pytest.fixture
def case(tmp_path):
    """Ten trajectories (t0-t2 unlabelled), one that does not load, and two labels files: they fill,
    override, confirm, call unsure (over a label and over none) and name the bad record."""
    recs = [canonical_record(tmp_path, f"t{i}", 1, **({} if i < 3 else {"label": i % 2})) for i in range(10)]
    lines = [json.dumps(r) for r in recs] + [json.dumps({"id": "broken", "steps": []})]
    data = write_jsonl(tmp_path / "d.jsonl", lines)
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": "t0", "label": 1}, {"id": "t3", "label": 1},
                                           {"id": "t4", "label": 0}, {"id": "t5", "label": None},
                                           {"id": "t1", "label": None}, {"id": "broken", "label": 1}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "t3", "label": 0}, {"id": "t6", "label": 0}])
    return data, [a, b]


def test_the_stream_labels_and_counts_by_hand(case):
    data, files = case
    src = LabelledStream(data, files)
    items = [x for _, x in src.items()]
    # t0 filled, t3 overridden (b's 0 over a's 1 and the data's 1), t4 and t6 confirmed, t1 and t5 unsure
    assert [(t.id, t.label) for t in items if isinstance(t, Trajectory)] == \
        [("t0", 1), ("t1", None), ("t2", None), ("t3", 0), ("t4", 0), ("t5", 1), ("t6", 0), ("t7", 1), ("t8", 0),
         ("t9", 1)]
    got = src.applied()
    assert (got.filled, got.overridden, got.confirmed, got.unsure, got.not_loaded) == (1, 1, 2, 2, ["broken"])
    assert got.unsure_kept == {"1": 1, "none": 1}
    assert src.bad == 1 and src.warning().startswith(
        f"warning: 1 of 11 record(s) of {data} did not load, so the data gives them no label; the first: ")
    again = [x for _, x in src.items()]  # a second pass counts afresh
    assert len(again) == 11 and src.applied().record() == got.record() and src.bad == 1
    loaded = load_trajectories(data, check_images=False)
    assert apply_labels(loaded, files, str(data)).record() == got.record()  # the loaded data, labelled in place
    assert [t.label for t in loaded.trajectories] == [t.label for t in items if isinstance(t, Trajectory)]


def test_an_id_outside_the_data_is_an_error_before_any_record_is_read(case, tmp_path, monkeypatch):
    data, files = case
    stray = write_jsonl(tmp_path / "stray.jsonl", [{"id": "t1", "label": 1}, {"id": "t404", "label": 0},
                                                   {"id": "t405", "label": 0}])
    from adaptrubric_local.formats import stream

    def no_parse(*a, **k):
        raise AssertionError("a record was parsed")

    monkeypatch.setattr(stream.canonical, "parse_record", no_parse)
    with pytest.raises(LabelsError) as streamed:
        LabelledStream(data, [files[0], stray])
    assert f"{stray}: line 2: id 't404' is not in {data} (and 1 more: t405)" in str(streamed.value)


def test_without_labels_files_the_data_is_handed_out_as_it_is(case):
    data, _files = case
    src = LabelledStream(data)
    labels = [x.label for _, x in src.items() if isinstance(x, Trajectory)]
    assert labels == [t.label for t in load_trajectories(data, check_images=False).trajectories]
    assert src.applied().record()["files"] == [] and src.sources() == {data.resolve()}
