"""Reading code-like actions (formats/actions_text.py) and re-pairing after-screens (formats/screens.py)."""
import pytest

from adaptrubric_local.formats.actions_text import classify_code_action, code_step
from adaptrubric_local.formats.screens import FINAL_SCREEN, after_to_before
from adaptrubric_local.types import Step


@pytest.mark.parametrize("action,expected", [
    ("pyautogui.typewrite('hello')", ("type", "hello", None)),
    ('write(text="abc")', ("type", "abc", None)),
    ("input_text('x y')", ("type", "x y", None)),
    ("type(content='line\\n')", ("type", "line\n", None)),
    ("answer('42')", ("answer", None, "42")),
    ("finished(content='done it')", ("answer", None, "done it")),
    ("finished(content='it\\'s 3')", ("answer", None, "it's 3")),
    ("finished()", ("answer", None, None)),
    ("terminate(message=\"bye\")", ("answer", None, "bye")),
    ("pyautogui.hotkey('ctrl', 'c')", ("hotkey", None, None)),
    ("pyautogui.press('enter')", ("key", None, None)),
    ("pyautogui.scroll(-3)", ("scroll", None, None)),
    ("pyautogui.dragTo(3, 4)", ("drag", None, None)),
    ("pyautogui.CLICK(3, 4)", ("tap", None, None)),
    ("tap(3, 4)", ("tap", None, None)),
    ("swipe(up)", ("swipe", None, None)),
    ("click(start_box='(10,20)')", ("tap", None, None)),
    ("WAIT", ("wait", None, None)),
    ("DONE", ("done", None, None)),
    ("FAIL", ("fail", None, None)),
    ("look around", (None, None, None)),
    ("pyautogui.moveTo(9, 6); time.sleep(0.5); pyautogui.vscroll(-6)", ("scroll", None, None)),
    ("pyautogui.moveTo(9, 6)", ("hover", None, None)),
    # Agent-S style typing, as in OSReward's committed windows/interngui-sample traj.jsonl
    ("import pyperclip;pyautogui.click(1, 2);pyperclip.copy('Dota 2');pyautogui.hotkey('ctrl', 'v');"
     "pyautogui.press('enter');", ("type", "Dota 2", None)),
])
def test_classify_code_action(action, expected):
    assert classify_code_action(action) == expected


def test_the_type_is_the_call_made_not_a_word_in_the_thought():
    # UI-TARS code as ZeroGUI's uitars.py L398-413 writes it: the thought in a docstring, then the call
    code = ("import pyautogui\nimport time\n'''\nObservation:\n\n\nThought:\nI should scroll down, then type "
            "the name.\n'''\n\npyautogui.click(120.0, 40.0, button='left')")
    assert classify_code_action(code) == ("tap", None, None)
    assert classify_code_action("# press enter later\ntime.sleep(3)\npyautogui.scroll(5)") == ("scroll", None, None)


def test_code_step_keeps_text_thought_and_answer():
    step, ans = code_step("/s.png", {"name": "answer('7')"}, "because")
    assert step == Step(screenshot="/s.png", action='{"name": "answer(\'7\')"}', action_type="answer",
                        text=None, thought="because")
    assert ans == "7"
    step, ans = code_step("/s.png", None, 5)
    assert step == Step(screenshot="/s.png", action="", action_type=None, text=None, thought=None)
    assert ans is None
    assert code_step("/s", "ä typewrite('ü')", None)[0].text == "ü"
    assert code_step("/s", {"a": "ü"}, None)[0].action == '{"a": "ü"}'


def test_after_to_before_pairs_each_action_with_the_screen_it_was_taken_on():
    after = [Step(screenshot=f"/after_{n}.png", action=f"a{n}") for n in (1, 2, 3)]
    got = after_to_before("/initial.png", after)
    assert [(s.screenshot, s.action) for s in got] == [
        ("/initial.png", "a1"), ("/after_1.png", "a2"), ("/after_2.png", "a3"), ("/after_3.png", FINAL_SCREEN)]
    assert got[-1].action_type == "observe"
    assert [s.screenshot for s in after_to_before(None, after)][:2] == [None, "/after_1.png"]
    assert after_to_before("/initial.png", []) == []
