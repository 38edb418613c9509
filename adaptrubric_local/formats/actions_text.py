"""Read an action type, typed text and submitted answer off an action written as code: a pyautogui
line (`pyautogui.typewrite('hi')`), a function call (`type(content='hi')`, `finished(content='3')`,
`answer('3')`) or a bare keyword (OSWorld's `DONE`/`FAIL`/`WAIT`). Shared by the loaders of formats
whose actions are code, as are the pieces every loader builds its steps with (`step_objects`, `gather`,
`described_step`, `nonblank`); knows nothing about any one format's files.

The action type is the name of the call the action makes (its first call, unless that only moves the
pointer or waits before another), never a keyword anywhere in the text: a comment or a docstring
holding the agent's thought does not change it. Text put on the clipboard and pasted
(`pyperclip.copy('x'); pyautogui.hotkey('ctrl', 'v')`, as some OSWorld agents type) is typed text.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..types import Step
from .base import DataError, require

_CALL_RE = re.compile(r"(?<![\w.'\"])(?:pyautogui\.|computer\.|browser\.)?([A-Za-z_]\w*)\s*\(")
_STR = r"(['\"])((?:\\.|(?!\1).)*)\1"
_TYPE_RE = re.compile(r"(?:typewrite|write|type|input_text)\s*\(\s*(?:(?:text|content|message)\s*=\s*)?" + _STR,
                      re.S)
_ANSWER_RE = re.compile(r"(?:answer|finished|terminate|exit)\s*\(\s*(?:(?:content|answer|message|text)\s*=\s*)?"
                        + _STR, re.S)
_PASTE_RE = re.compile(r"pyperclip\.copy\(\s*" + _STR + r"\s*\)\s*;?\s*pyautogui\.hotkey\(\s*['\"](?:ctrl|command)['\"]"
                       r"\s*,\s*['\"]v['\"]\s*\)", re.S)
_WEAK = ("hover", "wait")  # a call that only prepares another (moveTo before a scroll) gives way to it
_COMMENTS = re.compile(r"'''.*?'''|\"\"\".*?\"\"\"|#[^\n]*", re.S)
_KINDS = {"typewrite": "type", "write": "type", "type": "type", "input_text": "type", "hotkey": "hotkey",
          "press": "key", "keydown": "key", "keyup": "key", "scroll": "scroll", "hscroll": "scroll",
          "vscroll": "scroll", "drag": "drag", "dragto": "drag", "dragrel": "drag", "click": "tap",
          "left_single": "tap", "left_double": "double_click", "doubleclick": "double_click",
          "tripleclick": "tap", "right_single": "right_click", "rightclick": "right_click", "middleclick": "tap",
          "tap": "tap", "long_press": "long_press", "swipe": "swipe", "moveto": "hover", "hover": "hover",
          "wait": "wait", "sleep": "wait", "finished": "answer", "answer": "answer", "terminate": "answer",
          "exit": "answer", "call_user": "call_user", "press_home": "press_home", "press_back": "press_back",
          "open_app": "open_app"}
_KEYWORDS = {"DONE": "done", "FAIL": "fail", "WAIT": "wait"}


def nonblank(value: Any) -> str | None:
    """`value` when it is a string with more than whitespace in it, else None."""
    return value if isinstance(value, str) and value.strip() else None


def step_objects(obj: Any, key: str, file: Path, record: str,
                 problem: str = "step must be an object") -> Iterator[tuple[int, dict]]:
    """(index, step) of the list `obj[key]`; DataError naming `key[i]` for a step that is not an object."""
    for i, s in enumerate(require(obj, key, file, record, list)):
        if not isinstance(s, dict):
            raise DataError(file, problem, record, f"{key}[{i}]")
        yield i, s


def gather(steps: Iterable[tuple[Step, str | None]]) -> tuple[list[Step], str | None]:
    """(the steps, the last answer one of them submits) of (step, answer) pairs."""
    pairs = list(steps)
    return [step for step, _ in pairs], next((ans for _, ans in reversed(pairs) if ans is not None), None)


def described_step(shot: str | None, described: tuple, thought: str | None = None) -> tuple[Step, str | None]:
    """(Step, answer) of a screenshot and an (action text, action_type, typed text, answer) description."""
    action, atype, text, answer = described
    return Step(screenshot=shot, action=action, action_type=atype, text=text, thought=thought), answer


def _unescape(text: str) -> str:
    try:
        return json.loads('"' + text.replace('"', '\\"').replace("\\'", "'") + '"')
    except ValueError:
        return text


def action_text(action: Any) -> str:
    """An action as one string: itself when it is one, else its JSON."""
    return action if isinstance(action, str) else json.dumps(action, ensure_ascii=False)


def classify_code_action(action: str) -> tuple[str | None, str | None, str | None]:
    """(action_type, typed text, answer) read off one code-like action string. Docstrings and
    comments are skipped (UI-TARS code carries the thought in a docstring) and `time.sleep` between
    calls is not an action (a call on another module is not read)."""
    code = _COMMENTS.sub(" ", action)
    if code.strip() in _KEYWORDS:
        return _KEYWORDS[code.strip()], None, None
    if m := _ANSWER_RE.search(code):
        return "answer", None, _unescape(m.group(2))
    if m := _TYPE_RE.search(code) or _PASTE_RE.search(code):
        return "type", _unescape(m.group(2)), None
    kinds = [_KINDS[c.group(1).lower()] for c in _CALL_RE.finditer(code) if c.group(1).lower() in _KINDS]
    return next((k for k in kinds if k not in _WEAK), kinds[0] if kinds else None), None, None


def code_step(shot: str | None, raw_action: Any, thought: Any) -> tuple[Step, str | None]:
    """A Step from a code-like action, and the answer it submits, if any."""
    action = action_text(raw_action or "")
    atype, text, answer = classify_code_action(action)
    return Step(screenshot=shot, action=action, action_type=atype, text=text, thought=nonblank(thought)), answer
