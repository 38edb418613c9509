"""evaluation/review_sample.py: the seeded sample of cards a large run's review page shows."""
import json

from adaptrubric_local.evaluation.review_sample import _rank, note, sample_ids


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


def test_missing_trajectories_are_drawn_with_the_verdicts_and_zero_cards_is_every_id(tmp_path):
    ids = [f"t{k}" for k in range(50)]
    path = _write(tmp_path / "v.jsonl", ids[:30])
    assert sample_ids(path, 10, more=ids[30:]) == set(sorted(ids, key=lambda i: _rank(_seed(), i))[:10])
    assert sample_ids(path, 0) is None  # every card


def test_the_note_says_how_many_of_how_many():
    text = note(2000, 1_000_000, 2000)
    assert "shows 2000 of the 1000000 verdicts" in text and "--review-cards" in text
