"""A labelled copy read without its screenshots' folders (evaluation/image_roots.py): the command stops
with the fix when most records did not load for that reason, and not otherwise."""
import json
from types import SimpleNamespace

import pytest

from adaptrubric_local.evaluation.image_roots import outside_image_roots
from adaptrubric_local.formats.base import OUTSIDE_ROOTS


def _loaded(outside: int, fine: int, other_errors: int = 0):
    errors = [f"copy.jsonl: record {i}: image path {OUTSIDE_ROOTS} (/data/img/{i}.png)" for i in range(outside)]
    errors += [f"copy.jsonl: record x{i}: no steps" for i in range(other_errors)]
    return SimpleNamespace(errors=errors, trajectories=list(range(fine)))


def test_most_records_outside_the_folder_stop_with_the_folders_merge_json_records(tmp_path):
    data = tmp_path / "copy.jsonl"
    data.write_text("")
    (tmp_path / "merge.json").write_text(json.dumps({"image_roots": ["/data", "/more"]}))
    with pytest.raises(ValueError) as exc:
        outside_image_roots(_loaded(outside=6, fine=4), data)
    msg = str(exc.value)
    assert msg.startswith(f"6 of the 10 records of {data} name screenshots outside its folder")
    assert "Pass --image-root /data --image-root /more" in msg and "copy.jsonl: record 0" in msg


def test_without_merge_json_the_fix_is_named_and_a_minority_does_not_stop(tmp_path):
    with pytest.raises(ValueError, match="Pass --image-root DIR, DIR being the folder that holds them"):
        outside_image_roots(_loaded(outside=5, fine=5), tmp_path / "copy.jsonl")
    outside_image_roots(_loaded(outside=4, fine=5, other_errors=2), tmp_path / "copy.jsonl")  # 4 of 11: goes on
    outside_image_roots(_loaded(outside=0, fine=0, other_errors=3), tmp_path / "copy.jsonl")
    outside_image_roots(None, tmp_path / "copy.jsonl")
