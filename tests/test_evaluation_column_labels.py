"""Labels files put on the columns (evaluation/column_labels.py) against labels.apply_labels on the loaded
trajectories: the same labels, counts, summary and run record, the same metrics, and the same errors."""
from __future__ import annotations

import json

import pytest
from stream_support import labelled_case, truth
from test_evaluation_columns import _approx

from adaptrubric_local.cli import main
from adaptrubric_local.evaluation import column_labels, columns
from adaptrubric_local.evaluation.harness import run_eval
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.labels import LabelsError, apply_labels

from conftest import write_jsonl


def _loaded(data, files):
    loaded = load_trajectories(data, check_images=False)
    return loaded, apply_labels(loaded, files, data_name=str(data))


def test_labels_on_columns_count_and_record_what_apply_labels_does(tmp_path):
    data, vfile, files = labelled_case(tmp_path)
    loaded, want = _loaded(data, files)
    _, _, d, got = columns.read(vfile, data, labels=files)
    assert got.record() == want.record() and got.summary() == want.summary()
    assert got.not_loaded == want.not_loaded == ["broken"]
    assert (got.filled, got.overridden, got.confirmed, got.unsure) == (5, 6, 1, 1)
    labels = {t.id: (t.label if t.label in (0, 1) else -1) for t in loaded.trajectories}
    missing = dict(zip(d["missing"], d["missing_labels"]))
    assert missing == {i: labels[i] for i in missing} and len(missing) == 6
    assert missing["t58"] == 1 - truth(58)  # a later unsure line never replaces a 0/1


@pytest.mark.parametrize("subset", ["data", "verdicts"])
def test_eval_with_labels_over_columns_gives_the_metrics_of_the_loaded_path(tmp_path, subset):
    data, vfile, files = labelled_case(tmp_path)
    loaded, applied = _loaded(data, files)
    said = []
    old = run_eval(vfile, tmp_path / "old", data, loaded, review=False, labels=applied.record(), subset=subset)
    new = run_eval(vfile, tmp_path / "new", data, review=False, subset=subset, labels_files=files, log=said.append)
    assert new["run"]["labels"] == old["run"]["labels"] == applied.record()
    for m in (old, new):
        m.pop("run")
    assert new["overall"]["n"] and new["coverage"]["not_loaded"] == ["broken"]
    assert new == _approx(old)
    assert said[0].startswith(f"warning: 1 of 61 record(s) of {data} did not load") and said[1] == applied.summary()


def test_an_id_the_data_lacks_is_the_error_apply_labels_gives(tmp_path):
    data, vfile, files = labelled_case(tmp_path)
    stray = write_jsonl(tmp_path / "stray.jsonl", [{"id": "t1", "label": 1}]
                        + [{"id": f"nope{k}", "label": 0} for k in range(6)])
    for paths in ([stray], [files[0], stray]):
        with pytest.raises(LabelsError) as want:
            _loaded(data, paths)
        with pytest.raises(LabelsError) as got:
            columns.read(vfile, data, labels=paths)
        assert str(got.value) == str(want.value)
        assert f"{stray}: line 2: id 'nope0' is not in {data} (and 5 more: nope1, nope2, nope3, ...)" in str(got.value)


def test_a_bad_labels_line_stops_before_the_data_is_read(tmp_path):
    _, vfile, _ = labelled_case(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "t1", "label": 1}\n{"id": "t2", "label": "yes"}\n')
    with pytest.raises(LabelsError, match=f"{bad}: line 2, field 'label': must be 0, 1 or null"):
        columns.read(vfile, tmp_path / "no-such-data", labels=[bad])


def test_labels_without_data_are_refused_on_the_columns_path(tmp_path):
    _, vfile, files = labelled_case(tmp_path)
    with pytest.raises(ValueError, match="--labels needs DATA"):
        run_eval(vfile, tmp_path / "e", None, review=False, labels_files=files)


def test_no_labels_files_change_nothing(tmp_path):
    data, vfile, _ = labelled_case(tmp_path)
    _, _, d, applied = columns.read(vfile, data)
    _, _, d2, _ = columns.read(vfile, data, labels=[])
    assert applied is None and d["label"].tolist() == d2["label"].tolist()
    assert column_labels.apply([], d).record()["files"] == []


def _index(folder):
    text = (folder / "review_files" / "index.js").read_text()
    return json.loads(text[text.index("=") + 1:].strip().rstrip(";"))


def test_the_sampled_review_page_shows_the_labels_files_labels(tmp_path, capsys):
    """A run of more verdicts than --review-cards: metrics over columns, and the sampled cards carry the
    labels files' labels and the reviewer's marks, as the page of every card does."""
    data, vfile, files = labelled_case(tmp_path)
    labels = [x for f in files for x in ("--labels", str(f))]
    assert main(["eval", str(data), "--verdicts", str(vfile), *labels, "--out", str(tmp_path / "few"), "--quiet",
                 "--review-cards", "20"]) == 0
    assert "labels from a.jsonl, b.jsonl: 5 filled" in capsys.readouterr().err
    assert main(["eval", str(data), "--verdicts", str(vfile), *labels, "--out", str(tmp_path / "all"), "--quiet",
                 "--review-cards", "0"]) == 0
    few, every = _index(tmp_path / "few"), _index(tmp_path / "all")
    assert few["n"] == 20 < every["n"]
    col = every["columns"].index("label")
    by_id = {r[0]: r[col] for r in every["rows"]}
    assert {r[0]: r[col] for r in few["rows"]} == {r[0]: by_id[r[0]] for r in few["rows"]}
    shown = {r[0] for r in few["rows"]}
    assert few["meta"]["labels"]["marks"] == {i: m for i, m in every["meta"]["labels"]["marks"].items() if i in shown}
    m_few, m_all = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("few", "all"))
    assert m_few["overall"] == m_all["overall"] and m_few["run"]["labels"] == m_all["run"]["labels"]
