"""Pair each action with the screen it was taken on, for formats that store the screen AFTER each
action (OSWorld, ZeroGUI: `step_N.png` is saved once action N has run).

The package's Trajectory holds, per step, the screenshot seen BEFORE its action (the paper's
tau = (s_1, a_1, ..., s_T, a_T, s_{T+1}), §3): `after_to_before` turns "action N, then screen N" into
"screen N-1, then action N", with the initial screen (when the writer saved one) before action 1 and
the terminal screen s_{T+1} kept as a last step whose action is `FINAL_SCREEN` (type `observe`).
Knows nothing about files.
"""
from __future__ import annotations

from dataclasses import replace

from ..types import Step

FINAL_SCREEN = "(final screen: no action)"
SCREENS = ("before", "after")  # what a format's stored screenshot shows, relative to its step's action


def after_to_before(initial: str | None, steps: list[Step]) -> list[Step]:
    """Steps whose screenshot was taken after their action -> steps whose screenshot is the screen
    the action was taken on (`initial` for the first; None when the writer saved no initial screen),
    plus a final observe step holding the last screen."""
    out, before = [], initial
    for s in steps:
        out.append(replace(s, screenshot=before))
        before = s.screenshot
    if steps and before is not None:
        out.append(Step(screenshot=before, action=FINAL_SCREEN, action_type="observe"))
    return out
