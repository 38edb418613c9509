"""What a verdict file holds, read without its lines as objects (verdict_file.py): the running counts and
the state a resume starts from."""
from __future__ import annotations

import json
import random

from adaptrubric_local.verdict_file import FileState, Tally


def _line(i, status="ok", score=1, calls=1.1, tokens=700.3, error=None):
    return {"id": i, "status": status, "score": score if status == "ok" else None, "cost_calls": calls,
            "cost_tokens": tokens, "hit_cap": False, "hit_context": False, "error": error}


def test_the_tally_sums_exactly_whatever_the_order():
    lines = [_line(f"t{k}", calls=random.Random(k).random() * 3, tokens=random.Random(-k).random() * 1e4)
             for k in range(500)]
    a, b = Tally(), Tally()
    for d in lines:
        a.add(d)
    for d in reversed(lines):
        b.add(d)
    assert a.summary({}, 1.0) == b.summary({}, 1.0)
    c = Tally()
    for d in [*lines, _line("x", calls=0.7)]:
        c.add(d)
    c.remove(_line("x", calls=0.7))  # taken back to the bit
    assert c.summary({}, 1.0) == a.summary({}, 1.0)


def test_the_state_counts_the_last_line_of_a_retried_id(tmp_path):
    p = tmp_path / "v.jsonl"
    lines = [_line("a"), _line("b", "error", error="boom"), _line("c", "error", error="bad"), _line("b", score=0)]
    p.write_text("".join(json.dumps(d) + "\n" for d in lines) + '{"id": "d", "sta')  # and a torn last line
    state = FileState.scan(p)
    assert state.lines == 3 and len(state.ids) == 3 and set(state.errors) == {"c"}
    assert state.done("b", retry_errors=True) and not state.done("c", retry_errors=True)
    assert state.done("c", retry_errors=False) and not state.done("d", retry_errors=False)
    s = state.tally.summary({}, 1.0)
    assert (s["n"], s["scored"], s["errors"], s["positives"]) == (3, 2, 1, 1)
    assert p.read_text().endswith("\n") and '"d"' not in p.read_text()
