"""`calibrate` over columns: the fit from the p_success column and the data's labels (with the labels files
over them) equals the fit over loaded Verdict and Trajectory objects; `fit_arrays` gives probability.py's
figures at the loss's minimum; `calibrate --apply` holds one line at a time."""
from __future__ import annotations

import json
import math

import pytest
from stream_support import labelled_case

from adaptrubric_local.cli import main
from adaptrubric_local.evaluation import calibration as C
from adaptrubric_local.evaluation import columns
from adaptrubric_local.evaluation import probability as P
from adaptrubric_local.evaluation.harness import covered_verdicts
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.labels import apply_labels

from conftest import write_jsonl


def _with_extra_and_stale(tmp_path, vfile):
    """The case's verdicts plus a verdict for an id the data lacks and an error line for one it lacks."""
    lines = [*vfile.read_text().splitlines(),
             json.dumps({"id": "elsewhere", "status": "ok", "score": 1, "p_success": 0.99, "label": 0}),
             json.dumps({"id": "gone", "status": "error", "score": None, "error": "x"})]
    return write_jsonl(tmp_path / "v2.jsonl", lines)


@pytest.mark.parametrize("method", ["temperature", "platt"])
@pytest.mark.parametrize("with_labels", [False, True])
def test_the_streamed_fit_equals_the_fit_over_objects(tmp_path, method, with_labels):
    data, vfile, files = labelled_case(tmp_path)
    vfile = _with_extra_and_stale(tmp_path, vfile)
    files = files if with_labels else []
    loaded = load_trajectories(data, check_images=False)
    apply_labels(loaded, files, data_name=str(data))
    verdicts, cov_old = covered_verdicts(vfile, data, loaded, subset="verdicts", allow_extra=True)
    old = C.fit_verdicts(verdicts, method=method)
    rows, _, cov, applied = columns.covered(vfile, data, "verdicts", allow_extra=True, labels=files)
    new = C.fit_rows(rows, method=method)
    assert cov.extra == cov_old.extra == ["elsewhere"] and cov.stale_errors == ["gone"]
    assert (applied is not None) == with_labels
    assert (new.n, new.positives, new.field_name) == (old.n, old.positives, old.field_name)
    assert new.temperature == pytest.approx(old.temperature, rel=1e-9) and new.b == pytest.approx(old.b, abs=1e-9)
    for k in ("before", "after"):
        assert getattr(new, k) == pytest.approx(getattr(old, k), rel=1e-9, abs=1e-12), k
    with pytest.raises(ValueError, match="holds verdicts for 1 id"):
        columns.covered(vfile, data, "verdicts")


def test_fit_arrays_lands_on_the_minimum_with_probability_py_s_figures():
    import random

    import numpy as np

    rng = random.Random(3)
    p = [min(0.999, max(0.001, rng.betavariate(2, 2))) for _ in range(400)]
    y = [int(rng.random() < 0.5 + 0.8 * (q - 0.5)) for q in p]  # overconfident: the truth is flatter
    for method in ("temperature", "platt"):
        cal = C.fit(p, y, method)
        z = [math.log(q / (1 - q)) for q in p]
        g = [C._sigmoid(cal.a * zi + cal.b) - yi for zi, yi in zip(z, y)]
        assert abs(sum(gi * zi for gi, zi in zip(g, z))) < 1e-6  # d loss / d a = 0
        if method == "platt":
            assert abs(sum(g)) < 1e-6
        after = [cal.apply(q) for q in p]
        for probs, fig in ((p, cal.before), (after, cal.after)):
            assert fig["brier"] == pytest.approx(P.brier(probs, y), rel=1e-12)
            assert fig["ece"] == pytest.approx(P.ece(probs, y), rel=1e-9)
            assert fig["auroc"] == pytest.approx(P.auroc(probs, y), rel=1e-12)
            assert fig["nll"] == pytest.approx(-sum(math.log(q if t else 1 - q) for q, t in zip(probs, y)) / len(y))
            assert fig["std"] == pytest.approx(float(np.std(probs)))
        assert cal.after["nll"] < cal.before["nll"]
    with pytest.raises(ValueError, match="probability 1.5 is outside"):
        C.fit_arrays(np.array([0.2, 1.5]), np.array([0, 1]))
    with pytest.raises(ValueError, match="calibration needs at least 20"):
        C.fit_arrays(np.array(p[:19]), np.array(y[:19], dtype=np.int8))


def test_calibrate_command_says_what_load_labelled_said(tmp_path, capsys):
    data, vfile, files = labelled_case(tmp_path)
    args = ["calibrate", str(data), "--verdicts", str(vfile), "--out", str(tmp_path / "c.json")]
    assert main([*args, "--labels", str(files[0]), "--labels", str(files[1])]) == 0
    err = capsys.readouterr().err
    assert f"warning: 1 of 61 record(s) of {data} did not load, so the data gives them no label; the first: " \
           f"{data}, record line 8 (id broken)" in err
    assert "labels from a.jsonl, b.jsonl: 5 filled, 6 overridden, 1 the same as the data's, 1 unsure" in err
    cal = json.loads((tmp_path / "c.json").read_text())
    assert cal["fitted_on"]["labels"]["filled"] == 5 and cal["fitted_on"]["labels"]["not_loaded"] == 1


def test_calibrate_apply_holds_one_line_at_a_time(tmp_path):
    """Peak traced memory of `calibrate --apply` (scoring.calibrate_file) is the same for 2,000 and 20,000
    lines, within a few kilobytes: no line is kept once written."""
    import tracemalloc

    from adaptrubric_local.scoring import calibrate_file

    cal = C.Calibration(method="temperature", a=0.5)
    cal.save(tmp_path / "cal.json")
    peaks = []
    for n in (2000, 20000):
        src = tmp_path / f"v{n}.jsonl"
        with open(src, "w") as fh:
            for i in range(n):
                fh.write(json.dumps({"id": f"t{i:07d}", "status": "ok", "score": i % 2, "p_success": (i % 97) / 97,
                                     "raw_output": "x" * 200}) + "\n")
        tracemalloc.start()
        try:
            assert calibrate_file(src, tmp_path / f"out{n}.jsonl", tmp_path / "cal.json") == n
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert peaks[1] - peaks[0] < 16 * 1024, peaks
    last = json.loads((tmp_path / "out20000.jsonl").read_text().splitlines()[-1])
    assert last["p_success_calibrated"] == pytest.approx(cal.apply(last["p_success"]))


def test_file_sha256_reads_in_chunks_and_gives_the_files_hash(tmp_path):
    import hashlib

    path = tmp_path / "big.bin"
    path.write_bytes(bytes(range(256)) * (5 * 4096 + 3))  # over a megabyte, not a whole number of chunks
    assert C.file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()
