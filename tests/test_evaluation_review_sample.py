"""evaluation/review_sample.py: the seeded sample of cards a large run's review page shows."""
import json

from adaptrubric_local.evaluation.review_sample import _rank, more_lines, note, sample_ids


def _write(path, ids):
    path.write_text("".join(json.dumps({"id": i, "status": "ok", "score": 1}) + "\n" for i in ids))
    return path


def test_the_sample_is_the_smallest_seeded_hashes_whatever_the_line_order(tmp_path):
    ids = [f"t{k}" for k in range(200)]
    a = sample_ids(_write(tmp_path / "a.jsonl", ids), 10)
    b = sample_ids(_write(tmp_path / "b.jsonl", [*reversed(ids), "t3", "t7"]), 10)  # repeated ids count once
    assert a == b == set(sorted(ids, key=lambda i: _rank(_seed(), i))[:10])
    assert sample_ids(tmp_path / "a.jsonl", 10, seed=1) != a  # another seed, another sample
    assert sample_ids(tmp_path / "a.jsonl", 500) == set(ids)  # fewer ids than cards: every one


def _seed():
    from adaptrubric_local.evaluation.review_sample import SEED

    return SEED


def test_more_lines_counts_only_as_far_as_it_must(tmp_path):
    f = _write(tmp_path / "v.jsonl", [f"t{k}" for k in range(5)])
    assert more_lines(f, 4) and not more_lines(f, 5) and not more_lines(f, 0)


def test_the_note_says_how_many_of_how_many():
    text = note(2000, 1_000_000, 2000)
    assert "shows 2000 of the 1000000 verdicts" in text and "--review-cards" in text
