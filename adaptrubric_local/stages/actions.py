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
_TYPE_TYPES = {"type", "input", "input_text", "typewrite", "write", "set_text", "text"}
_ANSWER_TYPES = {"answer", "finish", "finished", "exit", "terminate", "done", "status", "response", "stop"}


def action_kind(step: Step) -> str:
    """The signal kind of one step's action."""
    at = (step.action_type or "").lower()
    act = step.action or ""
    if at in _ANSWER_TYPES:
        return "answer"
    if at in _TYPE_TYPES or step.text:
        return "type"
    if at in ("read", "quote"):
        return "read"
    if at in ("wait", "observe", "sleep"):
        return "wait"
    if at in ("scroll", "swipe") and not _TOGGLE.search(act):
        return "scroll"
    if at in ("open_app", "launch", "open"):
        return "open"
    if at in ("back", "home", "navigate_back", "navigate_home", "press_back", "press_home") \
            or re.search(r"navigate[ _](?:home|back)|press_(?:home|back)", act, re.I):
        return "navigate"
    if _TRANSFER.search(act):
        return "transfer"
    if _DELETE.search(act):
        return "delete"
    if _TOGGLE.search(act):
        return "toggle"
    if _SUBMIT.search(act) or (at in ("enter", "submit", "key") and re.search(r"enter|return", act, re.I)):
        return "submit"
    if at in ("tap", "click", "long_press", "double_click", "right_click") or re.search(r"\b(?:tap|click)", act, re.I):
        return "tap"
    return "other"


def is_high_signal(kind: str) -> bool:
    """Kinds whose surrounding frames carry outcome evidence."""
    return PRIORITY.get(kind, 0) >= 3
