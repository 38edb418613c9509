"""`--labels` on every command that reads labels, and `labels merge`: a data set whose labels are
partly missing and partly wrong, plus labels files that mend them (a later file wins, an unsure line
changes nothing), gives `eval`, `tts`, `calibrate`, `review` and `distill collect --teacher-labels`
the same figures as the same labels written into the data; `labels merge` writes that labelled copy
(screenshots referenced, not copied); the run records name each labels file with its sha256; an id
outside the data and a malformed line are errors that name them."""
import json
from pathlib import Path

import pytest

from adaptrubric_local.cli import main
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.labels import read_labels

from conftest import canonical_record, write_jsonl

N = 40


def _truth(i: int) -> int:
    return int(i % 3 != 0)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """(folder, data with wrong/missing labels, the same data with the true labels, labels files, verdicts)."""
    root = tmp_path_factory.mktemp("labels_case")
    recs = [canonical_record(root, f"t{i}", 3, instruction=f"Turn on setting {i // 4}.", label=_truth(i),
                             platform="android" if i % 2 else "web") for i in range(N)]
    written = write_jsonl(root / "written.jsonl", recs)
    partial = []
    for i, r in enumerate(recs):
        r = dict(r)
        if i < 10:
            r.pop("label")  # no label in the data: the labels file fills it
        elif i < 16:
            r["label"] = 1 - _truth(i)  # a wrong label: a later labels file overrides it
        partial.append(r)
    data = write_jsonl(root / "partial.jsonl", partial)
    a = write_jsonl(root / "a.jsonl", [{"id": f"t{i}", "label": _truth(i)} for i in range(10)]
                    + [{"id": f"t{i}", "label": 1 - _truth(i), "note": "first look"} for i in range(10, 16)]
                    + [{"id": "t39", "label": None, "note": "unsure: keeps the data's label"}])
    b = write_jsonl(root / "b.jsonl", [{"id": f"t{i}", "label": _truth(i), "note": "second reviewer"}
                                       for i in range(10, 16)])
    vfile = write_jsonl(root / "v.jsonl", [
        {"id": f"t{i}", "status": "ok", "score": int(p >= 0.5), "p_success": p, "model": "m"}
        for i, p in ((i, round(0.05 + 0.9 * ((i * 37) % 41) / 40, 4)) for i in range(N))])
    return root, data, written, [a, b], vfile


def _labels_args(files):
    return [x for f in files for x in ("--labels", str(f))]


def _same(a: dict, b: dict, keys):
    for k in keys:
        assert a[k] == b[k], k


def test_eval_and_tts_with_labels_equal_the_labels_written_into_the_data(case, tmp_path, capsys):
    _root, data, written, files, vfile = case
    assert main(["eval", str(data), *_labels_args(files), "--verdicts", str(vfile), "--out",
                 str(tmp_path / "e1"), "--quiet", "--no-review"]) == 0
    assert "labels from a.jsonl, b.jsonl: 10 filled, 6 overridden, 0 the same as the data's, 1 unsure" in \
        capsys.readouterr().err
    assert main(["eval", str(written), "--verdicts", str(vfile), "--out", str(tmp_path / "e2"),
                 "--quiet", "--no-review"]) == 0
    m1, m2 = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("e1", "e2"))
    _same(m1, m2, ("overall", "per_platform", "probability"))
    assert m1["overall"]["n"] == N
    run = json.loads((tmp_path / "e1" / "run.json").read_text())
    assert [f["sha256"] for f in run["labels"]["files"]] == [read_labels(f).sha256 for f in files]
    assert run["labels"]["overridden"] == 6 and "labels" not in json.loads((tmp_path / "e2" / "run.json").read_text())
    report = (tmp_path / "e1" / "report.md").read_text()
    assert f"labels file: `{files[1]}` (sha256 `{read_labels(files[1]).sha256[:16]}" in report
    for d, src in (("t1", data), ("t2", written)):
        extra = _labels_args(files) if src == data else []
        assert main(["tts", str(src), *extra, "--verdicts", str(vfile), "--out", str(tmp_path / d)]) == 0
    t1, t2 = (json.loads((tmp_path / d / "tts.json").read_text()) for d in ("t1", "t2"))
    _same(t1, t2, ("earlystop", "bestofn", "bestofn_soft", "random", "oracle", "pool", "classification"))
    assert json.loads((tmp_path / "t1" / "run.json").read_text())["labels"]["files"][0]["path"] == str(files[0])


def test_calibrate_with_labels_fits_what_the_written_labels_fit(case, tmp_path):
    _root, data, written, files, vfile = case
    assert main(["calibrate", str(data), *_labels_args(files), "--verdicts", str(vfile), "--out",
                 str(tmp_path / "c1.json")]) == 0
    assert main(["calibrate", str(written), "--verdicts", str(vfile), "--out",
                 str(tmp_path / "c2.json")]) == 0
    c1, c2 = (json.loads((tmp_path / f).read_text()) for f in ("c1.json", "c2.json"))
    _same(c1, c2, ("method", "a", "b", "n", "positives", "before", "after"))
    assert c1["fitted_on"]["labels"]["files"][1]["sha256"] == read_labels(files[1]).sha256


def _collected(out: Path) -> dict:
    rows = {}
    for split in ("train", "val"):
        for line in (out / f"{split}.jsonl").read_text().splitlines():
            r = json.loads(line)
            rows[r["id"]] = (split, r["label"], r["verify"]["response"], r["verify"]["prompt"])
    return rows


def test_distill_collect_teacher_labels_with_labels_equals_the_written_labels(case, tmp_path):
    _root, data, written, files, _vfile = case
    assert main(["distill", "collect", str(data), "--out", str(tmp_path / "d1"), "--teacher-labels",
                 *_labels_args(files), "--quiet", "--no-copy-images"]) == 0
    assert main(["distill", "collect", str(written), "--out", str(tmp_path / "d2"), "--teacher-labels", "--quiet",
                 "--no-copy-images"]) == 0
    r1, r2 = _collected(tmp_path / "d1"), _collected(tmp_path / "d2")
    assert r1 == r2 and len(r1) == N
    assert {i: lab for i, (_, lab, _, _) in r1.items()} == {f"t{i}": _truth(i) for i in range(N)}
    m1, m2 = (json.loads((tmp_path / d / "manifest.json").read_text()) for d in ("d1", "d2"))
    assert m1["counts"] == m2["counts"] and m1["labels"]["files"][0]["sha256"] == read_labels(files[0]).sha256


def test_review_with_labels_shows_the_labels(case, tmp_path):
    _root, data, _written, files, vfile = case
    assert main(["review", str(data), *_labels_args(files), "--verdicts", str(vfile), "--out",
                 str(tmp_path / "r"), "--quiet"]) == 0
    text = (tmp_path / "r" / "review_files" / "index.js").read_text()
    idx = json.loads(text[text.index("=") + 1:].rstrip().rstrip(";"))
    col = idx["columns"].index("label")
    assert {r[0]: r[col] for r in idx["rows"]} == {f"t{i}": _truth(i) for i in range(N)}
    # the reviewer's labels on the cards (review.js puts them on as an import would): the files' last word
    want = {**{f"t{i}": (_truth(i), None) for i in range(10)}, **{f"t{i}": (_truth(i), "second reviewer")
                                                                 for i in range(10, 16)},
            "t39": (None, "unsure: keeps the data's label")}
    marks = idx["meta"]["labels"]["marks"]
    assert {i: (m["label"], m["note"]) for i, m in marks.items()} == want
    assert idx["meta"]["labels"]["files"] == ["a.jsonl", "b.jsonl"]
    assert main(["eval", str(data), *_labels_args(files), "--verdicts", str(vfile), "--out",
                 str(tmp_path / "e"), "--quiet"]) == 0  # eval's page too
    text = (tmp_path / "e" / "review_files" / "index.js").read_text()
    assert json.loads(text[text.index("=") + 1:].rstrip().rstrip(";"))["meta"]["labels"]["marks"] == marks


def test_labels_merge_writes_the_labelled_copy_with_the_screenshots_where_they_are(case, tmp_path, capsys):
    root, data, written, files, vfile = case
    out = tmp_path / "merged"
    assert main(["labels", "merge", str(data), *_labels_args(files), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"--image-root {root.resolve()}" in said and "40 trajectories, 40 labelled" in said
    assert not [p for p in out.rglob("*") if p.suffix == ".png"]  # referenced, not copied
    copy = load_trajectories(out, image_roots=[root])  # images checked: every path reaches the original
    orig = {t.id: t for t in load_trajectories(written).trajectories}
    assert {t.id: t.label for t in copy.trajectories} == {i: t.label for i, t in orig.items()}
    assert all(t.screenshots == orig[t.id].screenshots and t.instruction == orig[t.id].instruction
               for t in copy.trajectories)
    record = json.loads((out / "merge.json").read_text())
    assert record["labels"]["files"][1]["sha256"] == read_labels(files[1]).sha256
    assert main(["eval", str(out), "--image-root", str(root), "--verdicts", str(vfile), "--out",
                 str(tmp_path / "e1"), "--quiet", "--no-review"]) == 0
    assert main(["eval", str(written), "--verdicts", str(vfile), "--out", str(tmp_path / "e2"),
                 "--quiet", "--no-review"]) == 0
    m1, m2 = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("e1", "e2"))
    _same(m1, m2, ("overall", "per_platform", "probability"))
    assert main(["labels", "merge", str(written), "--labels", str(files[0]), "--out", str(written.parent)]) == 2
    assert "holds the data set's own files" in capsys.readouterr().err
    assert not (written.parent / "trajectories.jsonl").exists()


def test_an_id_outside_the_data_or_a_bad_line_stops_the_command_naming_it(case, tmp_path, capsys):
    _root, data, _written, files, vfile = case
    stray = write_jsonl(tmp_path / "stray.jsonl", [{"id": "t1", "label": 1}, {"id": "t404", "label": 0}])
    for cmd in (["eval", "--verdicts", str(vfile), "--out", str(tmp_path / "x")],
                ["calibrate", "--verdicts", str(vfile), "--out", str(tmp_path / "x.json")],
                ["review", "--verdicts", str(vfile), "--out", str(tmp_path / "x")]):
        assert main([*cmd, str(data), "--labels", str(stray)]) == 2
        err = capsys.readouterr().err
        assert f"{stray}: line 2: id 't404' is not in {data}" in err, cmd
    assert main(["distill", "collect", str(data), "--out", str(tmp_path / "d"), "--teacher-labels", "--labels",
                 str(stray)]) == 2
    assert "id 't404' is not in" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "t1", "label": 1}\n{"id": "t2", "label": "yes"}\n')
    assert main(["labels", "merge", str(data), "--labels", str(bad), "--out", str(tmp_path / "m")]) == 2
    assert f"{bad}: line 2, field 'label': must be 0, 1 or null" in capsys.readouterr().err
    assert main(["tts", "--verdicts", str(vfile), "--labels", str(files[0]), "--out", str(tmp_path / "t")]) == 2
    assert "--labels needs DATA" in capsys.readouterr().err


def test_labels_that_fill_the_data_and_verdicts_that_cover_part_of_it(tmp_path, capsys):
    """The two steps compose: --labels labels a data set that has none, then the trajectories without a
    verdict are counted as missing with the labels the file gave them (eval and tts alike)."""
    recs = [canonical_record(tmp_path, f"t{i}", 2, instruction=f"Task {i // 2}.", task_id=f"k{i // 2}")
            for i in range(6)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)  # no labels at all
    labels = write_jsonl(tmp_path / "l.jsonl", [{"id": f"t{i}", "label": int(i % 2 == 0)} for i in range(5)])
    vfile = write_jsonl(tmp_path / "v.jsonl", [{"id": "t0", "status": "ok", "score": 1, "p_success": 0.9},
                                               {"id": "t1", "status": "ok", "score": 1, "p_success": 0.8}])
    assert main(["eval", str(data), "--labels", str(labels), "--verdicts", str(vfile), "--out",
                 str(tmp_path / "e"), "--quiet", "--no-review"]) == 0
    m = json.loads((tmp_path / "e" / "metrics.json").read_text())
    # labelled t0-t4 (t0, t2, t4 successes); t0 TP, t1 FP; t2, t4 missing successes (FN), t3 a missing failure
    # (TN); t5, unlabelled, is in no figure
    assert m["overall"]["confusion"] == {"tp": 1, "fp": 1, "fn": 2, "tn": 1} and m["overall"]["missing"] == 3
    assert m["coverage"]["missing"] == ["t2", "t3", "t4", "t5"] and m["coverage"]["missing_labelled"] == 3
    assert main(["tts", str(data), "--labels", str(labels), "--verdicts", str(vfile), "--out",
                 str(tmp_path / "t"), "--quiet"]) == 0
    res = json.loads((tmp_path / "t" / "tts.json").read_text())
    assert res["classification"]["n"] == 5 and res["coverage"]["missing_labelled"] == 3


def _stale_verdicts(root: Path, vfile: Path, data: Path) -> Path:
    """The verdict lines as `score` wrote them over `data`: each with the label the data had then."""
    then = {t.id: t.label for t in load_trajectories(data).trajectories}
    rows = [dict(json.loads(x), label=then[json.loads(x)["id"]]) for x in vfile.read_text().splitlines()]
    return write_jsonl(root / "stale_verdicts.jsonl", rows)


def test_a_labelled_copy_read_without_image_root_stops_with_the_fix_never_the_old_labels(case, tmp_path, capsys):
    """The issue's case: `labels merge` writes a labelled copy; eval/tts/calibrate/review on it without
    --image-root stop and name the flag with the folder merge.json records (before, 40 of 40 records did not
    load and the figures came from the labels stored in the verdict lines); with it, the new labels."""
    root, data, written, files, vfile = case
    stale = _stale_verdicts(tmp_path, vfile, data)
    out = tmp_path / "merged"
    assert main(["labels", "merge", str(data), *_labels_args(files), "--out", str(out)]) == 0
    capsys.readouterr()
    for cmd in (["eval", "--out", str(tmp_path / "e3"), "--quiet", "--no-review"],
                ["eval", "--out", str(tmp_path / "e4"), "--model", str(tmp_path / "no-model")],  # before any model
                ["tts", "--out", str(tmp_path / "t3")], ["calibrate", "--out", str(tmp_path / "c3.json")],
                ["review", "--out", str(tmp_path / "r3"), "--quiet"]):
        given = [] if "--model" in cmd else ["--verdicts", str(stale)]
        assert main([*cmd, str(out), *given]) == 2, cmd[0]
        err = capsys.readouterr().err
        assert f"40 of the 40 records of {out} name screenshots outside its folder" in err, cmd[0]
        assert f"Pass --image-root {root.resolve()} (the folders {out / 'merge.json'} records)" in err, cmd[0]
    assert not (tmp_path / "e3" / "metrics.json").exists()
    assert main(["eval", str(out), "--image-root", str(root), "--verdicts", str(stale), "--out",
                 str(tmp_path / "e1"), "--quiet", "--no-review"]) == 0
    assert main(["eval", str(written), "--verdicts", str(vfile), "--out", str(tmp_path / "e2"),
                 "--quiet", "--no-review"]) == 0
    m1, m2 = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("e1", "e2"))
    _same(m1, m2, ("overall", "per_platform", "probability"))
    assert main(["eval", str(data), "--verdicts", str(stale), "--out", str(tmp_path / "e0"),
                 "--quiet", "--no-review"]) == 0
    m0 = json.loads((tmp_path / "e0" / "metrics.json").read_text())  # the old labels give other figures
    assert m0["overall"]["acc"] != m2["overall"]["acc"]


def test_records_that_did_not_load_are_left_out_of_the_figures_and_named(case, tmp_path, capsys):
    """3 of 40 records name a screenshot outside the data folder: the other 37 give the figures they give
    alone, the 3 are named, and the labels their verdict lines carry are not used."""
    root, _data, written, _files, vfile = case
    stale = _stale_verdicts(tmp_path, vfile, written)
    lines = written.read_text().splitlines()
    bad = {"t3", "t8", "t20"}
    mixed, alone = [], []
    for x in lines:
        r = json.loads(x)
        if r["id"] in bad:
            r["steps"][0]["screenshot"] = "../../elsewhere/shot.png"
        else:
            alone.append(r)
        mixed.append(r)
    mixed_file = write_jsonl(root / "mixed.jsonl", mixed)
    alone_file = write_jsonl(root / "alone.jsonl", alone)
    try:
        capsys.readouterr()
        assert main(["eval", str(mixed_file), "--verdicts", str(stale), "--out", str(tmp_path / "e1"),
                     "--quiet", "--no-review"]) == 0
        err = capsys.readouterr().err
        assert f"WARNING: 3 record(s) of {mixed_file} did not load (first: t3, t8, t20)" in err
        assert "the 3 verdict(s)" in err and "are left out of the figures" in err
        assert main(["eval", str(alone_file), "--verdicts", str(stale), "--out", str(tmp_path / "e2"),
                     "--quiet", "--no-review", "--allow-extra"]) == 0
        m1, m2 = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("e1", "e2"))
        _same(m1, m2, ("overall", "per_platform", "probability"))
        assert m1["overall"]["n"] == 37 and m1["coverage"]["not_loaded"] == ["t3", "t8", "t20"]
        report = (tmp_path / "e1" / "report.md").read_text()
        assert "Percentages over all 37 labelled trajectories" in report and "3 record(s) of" in report
    finally:
        for f in (mixed_file, alone_file):
            f.unlink()


def test_labels_merge_streams_the_copy_the_whole_data_would_give(case, tmp_path, capsys, monkeypatch):
    """The copy is written record by record: byte for byte what the labelled data loaded whole writes, a bad
    record named on stderr and not copied; a copy that does not read back with the same ids and labels (here
    a writer that drops one label) is an error."""
    from adaptrubric_local.formats import canonical
    from adaptrubric_local.labelled_stream import apply_labels

    _root, data, _written, files, _vfile = case
    broken = write_jsonl(tmp_path / "broken.jsonl", [*data.read_text().splitlines(), '{"id": "nope", "steps": []}'])
    out = tmp_path / "merged"
    assert main(["labels", "merge", str(broken), *_labels_args(files), "--out", str(out)]) == 0
    said = capsys.readouterr()
    assert f"not copied (bad record): {broken}, record line 41 (id nope)" in said.err
    assert "40 trajectories, 40 labelled; 1 bad record(s) not copied" in said.out
    loaded = load_trajectories(broken, check_images=False)
    apply_labels(loaded, files, str(broken))
    canonical.write(loaded.trajectories, out / "whole.jsonl", reference=True)
    assert (out / "trajectories.jsonl").read_bytes() == (out / "whole.jsonl").read_bytes()
    assert json.loads((out / "merge.json").read_text())["bad_records"] == 1
    line = canonical.record_line

    def drops_a_label(t, path, reference=False):
        return line(t, path, reference).replace('"label": 1', '"label": null', 1 if t.id == "t7" else 0)

    monkeypatch.setattr(canonical, "record_line", drops_a_label)
    assert main(["labels", "merge", str(data), *_labels_args(files), "--out", str(tmp_path / "m2")]) == 2
    assert "trajectories.jsonl does not read back as written: the labels differ" in capsys.readouterr().err


def test_labels_merge_holds_few_bytes_a_record(tmp_path, capsys):
    """Streamed, `labels merge` of 2,500 records of 8 steps (about 2 KB each) with a labels file for every id
    peaks under 2,500 traced bytes a record, most of them the labels it must keep (reading the file alone
    peaks near 850 a line); loaded whole, the data set and the labels held about 9,700."""
    import tracemalloc

    n = 2500
    data = tmp_path / "d" / "data.jsonl"
    data.parent.mkdir()
    with open(data, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"t{i:06d}", "instruction": "Open the settings app and turn on Wi-Fi",
                                 "label": i % 2, "steps": [{"screenshot": "s.png", "action": f"click({i}, {s})",
                                                            "thought": "x" * 200} for s in range(8)]}) + "\n")
    labels = write_jsonl(tmp_path / "l.jsonl", [{"id": f"t{i:06d}", "label": 1 - i % 2} for i in range(n)])
    assert main(["labels", "merge", str(data), "--labels", str(labels), "--out", str(tmp_path / "warm")]) == 0
    tracemalloc.start()  # after a first run: the modules it imports are not counted
    try:
        assert main(["labels", "merge", str(data), "--labels", str(labels), "--out", str(tmp_path / "o")]) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"{n} trajectories, {n} labelled" in capsys.readouterr().out
    assert peak / n < 2500, f"{peak / n:.0f} bytes a record"


@pytest.mark.parametrize("fmt", ["androidgen", "zerogui", "osreward", "clawgui"])
def test_labels_merge_of_a_folder_format_loads_it_whole_and_writes_the_same_copy(fmt, tmp_path, capsys):
    """A folder format cannot stream: it is loaded whole and handed out the same way, so the copy is what
    the labelled data writes and its label the labels file's."""
    from adaptrubric_local.formats import canonical
    from adaptrubric_local.labelled_stream import apply_labels

    from conftest import make_dataset

    data, tid = make_dataset(fmt, tmp_path / "d")
    labels = write_jsonl(tmp_path / "l.jsonl", [{"id": tid, "label": 1}])
    out = tmp_path / "merged"
    assert main(["labels", "merge", str(data), "--format", fmt, "--labels", str(labels), "--out", str(out)]) == 0
    assert "1 trajectories, 1 labelled" in capsys.readouterr().out
    loaded = load_trajectories(data, fmt=fmt, check_images=False)
    apply_labels(loaded, [labels], str(data))
    canonical.write(loaded.trajectories, out / "whole.jsonl", reference=True)
    assert (out / "trajectories.jsonl").read_bytes() == (out / "whole.jsonl").read_bytes()
    assert [t.label for t in load_trajectories(out / "trajectories.jsonl", check_images=False,
                                               image_roots=[tmp_path]).trajectories] == [1]
