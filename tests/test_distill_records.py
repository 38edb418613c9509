"""The files of a distillation folder (distill/records.py): thinking taken out of answers, the task
split, and the last rejection per id."""
import json

import pytest

from adaptrubric_local.distill.records import FILES, split_tasks
from adaptrubric_local.thinking import split


@pytest.mark.parametrize("text, answer, thinking", [
    ("SCORE: 1", "SCORE: 1", None),
    ("<think>look at frame 3</think>\n\nSCORE: 1", "SCORE: 1", "look at frame 3"),
    ("look at frame 3\n</think>\n\nIt shows.\nSCORE: 0", "It shows.\nSCORE: 0", "look at frame 3"),
    ("<think>a</think>x<think>b</think>\nSCORE: 1", "x\nSCORE: 1", "a\n\nb"),
    ("\n\n  SCORE: 1", "SCORE: 1", None),
    ("<think></think>SCORE: 1", "SCORE: 1", None),
])
def test_split_thinking(text, answer, thinking):
    s = split(text)  # a record's answer (targets) and thinking (`reasoning`)
    assert (s.answer, s.thinking) == (answer, thinking)


def test_split_tasks_is_seeded_and_keeps_one_of_each_side():
    tasks = [f"t{i}" for i in range(10)]
    assert split_tasks(tasks, 0.2, 0) == split_tasks(list(reversed(tasks)), 0.2, 0)
    assert len(split_tasks(tasks, 0.2, 0)) == 2 and split_tasks(tasks, 0.2, 0) != split_tasks(tasks, 0.2, 1)
    assert len(split_tasks(["a", "b"], 0.01, 0)) == 1 and len(split_tasks(["a", "b"], 0.99, 0)) == 1
    assert split_tasks(tasks, 0.0, 0) == set()


def last_rejections(out):
    path = out / FILES["rejected"]
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return {str(r["id"]): r for r in map(json.loads, filter(str.strip, lines))}


def test_last_rejection_per_id(tmp_path):
    (tmp_path / "rejected.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
        {"id": "a", "reason": "truncated", "max_new_tokens": 1024},
        {"id": "b", "reason": "unparsed"},
        {"id": "a", "reason": "truncated", "max_new_tokens": 8192})))
    last = last_rejections(tmp_path)
    assert last["a"]["max_new_tokens"] == 8192 and last["b"]["reason"] == "unparsed"
    assert last_rejections(tmp_path / "nowhere") == {}
