"""Action kinds (actions.py): the signal kind of a step, from its action_type and action string, which the
context selector and the evidence compiler share."""
import pytest

from adaptrubric_local.stages.actions import PRIORITY, action_kind, is_high_signal
from adaptrubric_local.types import Step


@pytest.mark.parametrize("action,action_type,text,kind", [
    ("finish(answer='42')", "finish", None, "answer"),
    ("type('hello')", "type", None, "type"),
    ("tap(3)", None, "typed by the step", "type"),  # a step carrying text typed it
    ("quote('total')", "read", None, "read"),
    ("wait(2)", "wait", None, "wait"),
    ("swipe(direction='up')", "swipe", None, "scroll"),
    ("swipe(direction='left')", "swipe", None, "toggle"),  # a sideways swipe flips a switch
    ("open_app('Clock')", "open_app", None, "open"),
    ("navigate_back()", None, None, "navigate"),
    ("hotkey('ctrl', 'c')", "hotkey", None, "transfer"),
    ("tap('Delete')", "tap", None, "delete"),
    ("tap('Wi-Fi toggle')", "tap", None, "toggle"),
    ("tap('Send')", "tap", None, "submit"),
    ("press('enter')", "key", None, "submit"),
    ("tap(120, 400)", "tap", None, "tap"),
    ("click the icon", None, None, "tap"),
    ("look around", None, None, "other"),
])
def test_action_kind(action, action_type, text, kind):
    assert action_kind(Step(screenshot=None, action=action, action_type=action_type, text=text)) == kind


def test_high_signal_kinds_are_those_of_priority_three_or_more():
    assert {k for k in PRIORITY if is_high_signal(k)} == {"answer", "submit", "type", "toggle", "transfer",
                                                           "delete", "read"}
    assert not is_high_signal("an unknown kind")
