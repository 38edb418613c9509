"""Classify a step's action into a signal kind, so the context selector and the evidence compiler
agree on what a high-signal action is (text entry, submit/confirm/send/save, answer, state-changing
tap). Reads the action string and optional `action_type`; knows nothing about images or rubrics.
"""
from __future__ import annotations

import re

from ..types import Step

# kind -> priority for frame selection (higher = keep first)
PRIORITY = {"answer": 6, "submit": 5, "type": 4, "toggle": 4, "transfer": 4, "delete": 4, "read": 3,
            "tap": 2, "open": 1, "navigate": 1, "scroll": 0, "wait": -1, "other": 0}

_SUBMIT = re.compile(r"\b(?:submit|confirm|send|save|ok|done|apply|post|publish|share|finish|create|add|"
                     r"book|checkout|reply|enter|yes|allow|delete|remove|uninstall|clear|install)\b", re.I)
_TOGGLE = re.compile(r"\b(?:toggle|switch|checkbox|check box|enable|disable|turn on|turn off|radio|slider|"
                     r"swipe\(direction='(?:left|right)'\))", re.I)
_TRANSFER = re.compile(r"\b(?:copy|paste|cut|move|export|import|upload|download|attach|ctrl\+?[cvx]|"
                       r"hotkey\(['\"]ctrl['\"],\s*['\"][cvx]['\"]\))", re.I)
_DELETE = re.compile(r"\b(?:delete|remove|trash|discard|uninstall|clear)\b", re.I)
# kind by action_type, first match wins ("type" also for any step with text; "scroll" not for a toggling swipe)
_BY_TYPE = [("answer", {"answer", "finish", "finished", "exit", "terminate", "done", "status", "response", "stop"}),
            ("type", {"type", "input", "input_text", "typewrite", "write", "set_text", "text"}),
            ("read", {"read", "quote"}), ("wait", {"wait", "observe", "sleep"}), ("scroll", {"scroll", "swipe"}),
            ("open", {"open_app", "launch", "open"}),
            ("navigate", {"back", "home", "navigate_back", "navigate_home", "press_back", "press_home"})]
# then kind by the action string, first match wins
_BY_ACTION = [("navigate", re.compile(r"navigate[ _](?:home|back)|press_(?:home|back)", re.I)),
              ("transfer", _TRANSFER), ("delete", _DELETE), ("toggle", _TOGGLE)]


def action_kind(step: Step) -> str:
    """The signal kind of one step's action."""
    at, act = (step.action_type or "").lower(), step.action or ""
    for kind, types in _BY_TYPE:
        if (at in types or (kind == "type" and step.text)) and not (kind == "scroll" and _TOGGLE.search(act)):
            return kind
    for kind, pattern in _BY_ACTION:
        if pattern.search(act):
            return kind
    if _SUBMIT.search(act) or (at in ("enter", "submit", "key") and re.search(r"enter|return", act, re.I)):
        return "submit"
    if at in ("tap", "click", "long_press", "double_click", "right_click") or re.search(r"\b(?:tap|click)", act, re.I):
        return "tap"
    return "other"


def is_high_signal(kind: str) -> bool:
    """Kinds whose surrounding frames carry outcome evidence."""
    return PRIORITY.get(kind, 0) >= 3
