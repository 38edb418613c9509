"""`calibrate`'s fit: on the labelled rows of the verdict table that carry a p_success, at the loss's
minimum with the figures worked out by hand; `calibrate --apply` holds one line at a time."""
from __future__ import annotations

import json
import math

import pytest
from stream_support import labelled_case

from adaptrubric_local.cli import main
from adaptrubric_local.evaluation import calibration as C
from adaptrubric_local.evaluation import verdict_table

from conftest import write_jsonl


def test_the_fit_takes_the_labelled_rows_with_a_probability(tmp_path):
    lines = [{"id": f"t{i}", "status": "ok" if i % 3 else "unparsed", "score": 1, "p_success": (i + 0.5) / 25,
              "label": int(i % 4 == 0 or i > 15)} for i in range(25)]
    lines += [{"id": "no-p", "status": "ok", "score": 0, "label": 0}, {"id": "no-label", "status": "ok",
                                                                       "p_success": 0.3}]
    table = verdict_table.read(write_jsonl(tmp_path / "v.jsonl", lines))
    cal = C.fit_rows(table.rows, method="platt")
    want = C.fit([d["p_success"] for d in lines[:25]], [d["label"] for d in lines[:25]], method="platt")
    assert (cal.n, cal.positives, cal.field_name) == (25, 7 + 9 - 3, "p_success")  # 0, 4, ..., 24 and 16..24
    assert (cal.a, cal.b, cal.before) == (want.a, want.b, want.before)


def _auroc(p, y):
    pos, neg = [q for q, t in zip(p, y) if t], [q for q, t in zip(p, y) if not t]
    return sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))


def _ece(p, y, bins=15):
    groups = {}
    for q, t in zip(p, y):
        groups.setdefault(min(int(q * bins), bins - 1), []).append((q, t))
    return sum(len(g) / len(p) * abs(sum(t for _, t in g) / len(g) - sum(q for q, _ in g) / len(g))
               for g in groups.values())


def test_the_fit_lands_on_the_minimum_with_the_figures_by_hand():
    import random

    import numpy as np

    rng = random.Random(3)
    p = [min(0.999, max(0.001, rng.betavariate(2, 2))) for _ in range(400)]
    y = [int(rng.random() < 0.5 + 0.8 * (q - 0.5)) for q in p]  # overconfident: the truth is flatter
    for method in ("temperature", "platt"):
        cal = C.fit(p, y, method)
        z = [math.log(q / (1 - q)) for q in p]
        g = [float(C._sigmoids(cal.a * zi + cal.b)) - yi for zi, yi in zip(z, y)]
        assert abs(sum(gi * zi for gi, zi in zip(g, z))) < 1e-6  # d loss / d a = 0
        if method == "platt":
            assert abs(sum(g)) < 1e-6
        after = [cal.apply(q) for q in p]
        for probs, fig in ((p, cal.before), (after, cal.after)):
            assert fig["brier"] == pytest.approx(sum((q - t) ** 2 for q, t in zip(probs, y)) / len(y), rel=1e-12)
            assert fig["ece"] == pytest.approx(_ece(probs, y), rel=1e-9)
            assert fig["auroc"] == pytest.approx(_auroc(probs, y), rel=1e-12)
            assert fig["nll"] == pytest.approx(-sum(math.log(q if t else 1 - q) for q, t in zip(probs, y)) / len(y))
            assert fig["std"] == pytest.approx(float(np.std(probs)))
        assert cal.after["nll"] < cal.before["nll"]
    with pytest.raises(ValueError, match="probability 1.5 is outside"):
        C.fit(np.array([0.2, 1.5]), np.array([0, 1]))
    with pytest.raises(ValueError, match="calibration needs at least 20"):
        C.fit(np.array(p[:19]), np.array(y[:19], dtype=np.int8))


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
