"""JSON tool calls of the `mobile_use` kind, as ClawGUI and OSReward's AndroidWorld runs write them, read
into a step's action text, action type, typed text and submitted answer; and the agent's thought read off
the model output around such a call.

The shape is Qwen-VL's: `<tool_call>{"name": "mobile_use", "arguments": {"action": "click",
"coordinate": [x, y]}}</tool_call>`, the arguments sometimes a JSON string of their own or given at the
top level (ZJU-REAL/ClawGUI `clawgui-rl/agent_system/environments/env_package/mobileworld/projection.py`
L218-242 at d990d3e, which maps fullwidth punctuation first, L48-70); the actions are those of its
prompt (`clawgui-rl/agent_system/environments/prompts/mobileworld.py` L14-25): click, long_press,
double_tap, type, swipe, open, drag, system_button, wait, terminate, answer (and GUI-Owl's key, interact).
The thought is the text before the call, as ClawGUI's phone agent splits it
(`clawgui-agent/phone_agent/model/client.py` L195-255): `<thinking>`/`<think>` tags and `Thought:`
prefixes dropped, `Action:` lines (a one-line summary) skipped.

Knows nothing about files or any one project's layout.
"""
from __future__ import annotations

import json
import re
from typing import Any

_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FULLWIDTH = str.maketrans({"\uff3b": "[", "\uff3d": "]", "\u3010": "[", "\u3011": "]", "\uff5b": "{",
                            "\uff5d": "}", "\uff08": "(", "\uff09": ")", "\uff0c": ",", "\uff1a": ":",
                            "\u201c": '"', "\u201d": '"'})

# the call's action -> the package's action_type (what actions.action_kind reads)
_TYPES = {"click": "tap", "tap": "tap", "double_tap": "double_click", "long_press": "long_press", "type": "type",
          "input_text": "type", "swipe": "swipe", "scroll": "scroll", "drag": "drag", "open": "open_app",
          "open_app": "open_app", "launch": "open_app", "wait": "wait", "answer": "answer", "terminate": "terminate",
          "status": "terminate", "key": "key", "interact": "interact"}
_BUTTONS = {"back": "back", "home": "home", "enter": "enter", "menu": "app_switch"}


def arguments_of(call: Any) -> dict | None:
    """The arguments dict of a tool call given as a dict or as JSON text (with or without the
    `<tool_call>` tags), or None when there is none."""
    try:
        if isinstance(call, str):
            text = call.translate(_FULLWIDTH)
            m = _BLOCK.search(text)
            call = json.loads(m.group(1) if m else text.strip())
        args = call.get("arguments", call if "action" in call else None) if isinstance(call, dict) else None
        args = json.loads(args) if isinstance(args, str) else args
    except ValueError:
        return None
    return args if isinstance(args, dict) and isinstance(args.get("action"), str) else None


def describe(args: dict) -> tuple[str, str | None, str | None, str | None]:
    """(action text, action_type, typed text, answer) for one call's arguments: `type` gives its text as
    typed text, `answer` its text as the answer; the action text reads `click(coordinate=[179, 1097])`."""
    name = str(args.get("action", "")).strip().lower()
    rest = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items() if k != "action")
    text = args.get("text") if isinstance(args.get("text"), str) else None
    atype = _TYPES.get(name)
    if name == "system_button":
        atype = _BUTTONS.get(str(args.get("button", "")).lower(), "key")
    return (f"{name}({rest})", atype, text if atype == "type" else None, text if name == "answer" else None)


def thought_before(output: Any, marker: str = "<tool_call>") -> str | None:
    """The model's thought: the text of `output` before `marker` (all of it when the marker is absent),
    without `<thinking>`/`<think>` tags, `Thought:` prefixes and `Action:` lines; None when empty."""
    if not isinstance(output, str):
        return None
    head = output.split(marker, 1)[0] if marker else output
    head = re.sub(r"</?think(?:ing)?>", "\n", head)
    lines = [line.strip() for line in head.splitlines()]
    lines = [line.removeprefix("Thought:").strip() for line in lines if not line.startswith("Action:")]
    return "\n".join(x for x in lines if x).strip() or None
