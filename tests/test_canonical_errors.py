"""Every way a canonical record can be wrong gets its own exact error, naming file, line, id and
field; the other records of the file still load, and a good record keeps every optional field."""

from adaptrubric_local.formats import canonical
from adaptrubric_local.types import Step, Trajectory

from conftest import make_png, write_jsonl

S = {"screenshot": "a.png", "action": "tap(1)"}
CASES = [  # (record, error after "{file}, record line N")
    ([1, 2], ": expected a JSON object, got list"),
    ({"id": "r", "instruction": "x"}, " (id r), field 'steps': required field missing"),
    ({"id": "r", "instruction": "x", "steps": "a.png"}, " (id r), field 'steps': expected list, got str"),
    ({"id": "r", "instruction": "x", "steps": [S], "extra": 1, "more": 2},
     (" (id r): unknown keys ['extra', 'more']; allowed: ['answer', 'id', 'instruction', 'label', 'platform', "
      "'steps', 'task_id']")),
    ({"id": "r", "instruction": "x", "steps": [S, 1]}, " (id r), field 'steps[1]': step must be a JSON object"),
    ({"id": "r", "instruction": "x", "steps": [{**S, "foo": 1}]},
     (" (id r), field 'steps[0]': unknown step keys ['foo']; allowed: ['action', 'action_type', 'screenshot', "
      "'text', 'thought']")),
    ({"id": "r", "instruction": "x", "steps": [{"screenshot": "nope.png"}]},
     " (id r), field 'steps[0].screenshot': image not found: {root}/nope.png"),
    ({"id": "r", "instruction": "x", "steps": [{"screenshot": 5}]},
     " (id r), field 'steps[0].screenshot': image path missing or not a string"),
    ({"id": "r", "instruction": "x", "steps": [S, {**S, "action_type": ["tap"]}]},
     " (id r), field 'steps[1].action_type': expected a string, got list"),
    ({"id": "r", "instruction": "x", "steps": [{**S, "text": True}]},
     " (id r), field 'steps[0].text': expected a string, got bool"),
    ({"id": "r", "instruction": "x", "steps": [{**S, "thought": {}}]},
     " (id r), field 'steps[0].thought': expected a string, got dict"),
    ({"id": ["r"], "instruction": "x", "steps": [S]}, " (id ['r']), field 'id': expected str or int, got list"),
    ({"id": "r", "steps": [S]}, " (id r), field 'instruction': required field missing"),
    ({"id": "r", "instruction": 3, "steps": [S]}, " (id r), field 'instruction': expected str, got int"),
    ({"id": "r", "instruction": "x", "steps": [S], "answer": {"a": 1}}, " (id r), field 'answer': expected a string, got dict"),
    ({"id": "r", "instruction": "x", "steps": [S], "platform": [1]}, " (id r), field 'platform': expected a string, got list"),
    ({"id": "r", "instruction": "x", "steps": [S], "task_id": False}, " (id r), field 'task_id': expected a string, got bool"),
    ({"id": "r", "instruction": "x", "steps": [S], "label": "maybe"},
     " (id r), field 'label': label must be 0/1 (or SUCCESS/FAIL), got 'maybe'"),
    ({"id": "r", "instruction": "x", "steps": []}, " (id r), field 'steps': trajectory has no steps"),
    ({"id": "r", "instruction": "x", "steps": [{"action": "tap"}]}, " (id r), field 'steps': trajectory has no screenshots"),
    ({"id": "r", "instruction": "  ", "steps": [S]}, " (id r), field 'instruction': instruction is empty"),
]
GOOD = {"id": 17, "instruction": "Do it.", "answer": 42, "platform": "android", "task_id": "t", "label": "SUCCESS",
        "steps": [{"screenshot": "a.png", "action": {"name": "tap", "x": "é"}, "action_type": "tap", "text": "hi",
                   "thought": 3.5}, {"action": "wait"}, {"screenshot": "a.png"}]}


def test_each_bad_record_has_its_exact_error_and_the_good_one_loads(tmp_path):
    make_png(tmp_path / "a.png", 1)
    p = tmp_path / "data.jsonl"
    write_jsonl(p, [r for r, _ in CASES] + [GOOD])
    res = canonical.load(p)
    assert [str(e) for e in res.errors] == [f"{p}, record line {n}" + msg.format(root=tmp_path)
                                             for n, (_, msg) in enumerate(CASES, start=1)]
    assert [e.record_id for e in res.errors] == [None] + ["r"] * 10 + [None] + ["r"] * 9
    shot = str(tmp_path / "a.png")
    assert res.trajectories == [Trajectory(
        id="17", instruction="Do it.", answer="42", platform="android", task_id="t", label=1,
        steps=[Step(screenshot=shot, action='{"name": "tap", "x": "é"}', action_type="tap", text="hi", thought="3.5"),
               Step(screenshot=None, action="wait"), Step(screenshot=shot, action="")])]  # no action: ""
    assert res.trajectories[0].source == str(p)


def test_a_repeated_id_is_an_error_on_the_later_line(tmp_path):
    make_png(tmp_path / "a.png", 1)
    p = tmp_path / "data.jsonl"
    rec = {"id": "a", "instruction": "x", "steps": [S]}
    write_jsonl(p, [rec, {**rec, "instruction": "y"}, {**rec, "id": "b"}])
    res = canonical.load(p)
    assert [(t.id, t.instruction) for t in res.trajectories] == [("a", "x"), ("b", "x")]
    assert [str(e) for e in res.errors] == [f"{p}, record line 2, field 'id': duplicate id 'a'"]
    assert res.errors[0].record_id is None  # the id belongs to the record that loaded
