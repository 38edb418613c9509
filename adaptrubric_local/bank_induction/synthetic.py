"""A synthetic app domain with a scripted teacher and a scripted verifier, for the bank demo and tests.

The domain ("ShopDesk", a made-up CRM) has three kinds of task, each with a success and a failed run:
look up a phone number (failure: no answer submitted), change an email (failure: never saved), refund
an order (failure: never confirmed). The scripted verifier follows its rubric literally: it routes by
word overlap with the router prompt's category lines and fails a trajectory only for a check its
rubric names (a submitted answer, a click on Save or on Confirm). `ScriptedTeacher` answers the
induction prompts from the trajectories shown, and the refine prompt with a fix for the family's
failure pattern (its first refund revision is useless, so that refinement has one to reject).
Neither is a model: they exist to exercise the procedure end to end.
"""
from __future__ import annotations

import itertools
import json
import random
import re
from collections import Counter
from pathlib import Path

from ..engine.base import Request
from ..engine.fake import ScriptedEngine

KINDS = ("lookup", "update", "refund")
NAMES = ["Ada Lin", "Bo Chen", "Cy Park", "Di Roy", "Ed Kim", "Flo Ng", "Gus Ray", "Hal Ito", "Ivy Sun", "Jo Lee",
         "Kai Wu", "Lu Ma", "Mo Diaz", "Nia Cole", "Oz Hart", "Pia Dunn"]
CHECKS = {"lookup": "an answer was submitted", "update": "a click on Save", "refund": "a click on Confirm"}


def _png(path: Path, text: str, seed: int) -> None:
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (96, 160), (240, 240 - seed % 40, 230))
    ImageDraw.Draw(im).text((4, 4), text[:14], fill=(0, 0, 0))
    im.save(path)


def _steps(kind: str, ok: bool, name: str, n: int) -> tuple[list[dict], str | None]:
    email = name.split()[0].lower() + "@example.com"
    actions = {"lookup": [(f"click(customer '{name}')", "click"), ("scroll(down)", "scroll")],
               "update": [(f"click(customer '{name}')", "click"), (f"type('{email}')", "type"),
                          ("click(Save)", "click") if ok else ("press(back)", "navigate_back")],
               "refund": [(f"click(order #{1000 + n})", "click"), ("click(Refund)", "click"),
                          ("click(Confirm)" if ok else "click(Cancel)", "click")]}[kind]
    steps = [{"action": a, "action_type": at, **({"text": email} if at == "type" else {})}
             for a, at in [("open_app(ShopDesk)", "open_app"), *actions]]
    return steps, (f"+1 555 01{n:02d}" if ok and kind == "lookup" else None)


def instruction(kind: str, name: str, n: int) -> str:
    """The task instruction of one synthetic task."""
    return {"lookup": f"What is the phone number of customer {name} in ShopDesk?",
            "update": f"Change the email of customer {name} to {name.split()[0].lower()}@example.com in ShopDesk.",
            "refund": f"Issue a refund for order #{1000 + n} in ShopDesk."}[kind]


def make_domain(out: str | Path, tasks_per_kind: int = 12, seed: int = 0) -> Path:
    """Write the domain as a canonical JSONL (with small screenshots) under `out`; returns the file."""
    out = Path(out)
    (out / "img").mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    rows = []
    for kind, n, ok in itertools.product(KINDS, range(tasks_per_kind), (True, False)):
        name = NAMES[(n + KINDS.index(kind) * 5) % len(NAMES)]
        tid = f"{kind}-{n:02d}"
        rid = f"{tid}-{'ok' if ok else 'fail'}"
        steps, answer = _steps(kind, ok, name, n)
        for i, s in enumerate(steps):
            s["screenshot"] = f"img/{rid}-{i}.png"
            _png(out / s["screenshot"], s["action"], rng.randrange(1000))
        rows.append({"id": rid, "task_id": tid, "instruction": instruction(kind, name, n), "steps": steps,
                     "label": int(ok), "platform": "shopdesk", **({"answer": answer} if answer else {})})
    path = out / "trajectories.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ----------------------------------------------------------------------------- scripted verifier
def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3}


def verifier_script(req: Request) -> str:
    """Route by overlap with the prompt's category lines; judge by the checks the rubric names."""
    if req.kind == "route":
        ins = re.search(r"TASK INSTRUCTION:\n(.*?)\n\nCATEGORIES", req.prompt, re.S).group(1)
        cats = re.findall(r"^- (\w+) : (.*)$", req.prompt, re.M)
        best = max(cats, key=lambda c: len(_words(ins) & _words(c[1] + " " + c[0].replace("_", " "))))
        return f"CATEGORY: {best[0]}"
    if req.kind == "cue":
        return "NO_HINT: the coarse rubric covers this task."
    m = re.search(r"VERIFICATION STEPS:\n(.*?)\nMETA RULE:", req.prompt, re.S)
    rubric = m.group(1).lower() if m else ""
    missing = [why for kind, shown, why in (("lookup", 'submitted answer: "', "no answer was submitted"),
                                            ("update", "click(Save)", "the edit was never saved"),
                                            ("refund", "click(Confirm)", "the refund was never confirmed"))
               if CHECKS[kind].lower() in rubric and shown not in req.prompt]
    why = missing[-1] if missing else "nothing the rubric asks for is missing"
    return f"{why}.\nSCORE: {int(not missing)}\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"


def scripted_verifier() -> ScriptedEngine:
    """The scripted verifier as an engine."""
    return ScriptedEngine(verifier_script, name="scripted-verifier")


# ----------------------------------------------------------------------------- scripted teacher
FAMILIES = {
    "crm_lookup": ("the agent must read a customer's detail (phone number, address) and answer with it",
                   "Answer a question about a customer record.", "lookup"),
    "crm_update": ("the agent changes a field of a customer record (email, name, phone)",
                   "Change a field of a customer record.", "update"),
    "crm_refund": ("the agent issues a refund for an order", "Refund an order.", "refund"),
}
STEPS = ["Identify the record or order the instruction names.", "Check the task's outcome."]
SECTIONS = {"common_pitfalls": ["Stopping one step early."], "special_rules": ["Any valid path counts."]}


class ScriptedTeacher:
    """Answers the induction and refine prompts; counts its calls per family."""

    def __init__(self, useless_first: tuple[str, ...] = ("crm_refund",)):
        self.calls: Counter = Counter()
        self.useless_first = set(useless_first)

    def __call__(self, req: Request) -> str:
        text = req.prompt + "\n" + req.suffix
        if "List the verification dimensions" in text:
            kinds = {k for k in KINDS if re.search({"lookup": "phone number", "update": "Change the email",
                                                    "refund": "refund for order"}[k], req.prompt)}
            dims = [{"name": f"{k} outcome", "check": f"Check the {k} task reached its outcome.",
                     "failure_pattern": "stops one step early", "task_kind": k, "evidence": []} for k in sorted(kinds)]
            return "Here is what I found:\n```json\n" + json.dumps({"dimensions": dims}) + "\n```"
        if "Group the dimensions" in text:
            lookup = [f"Check that {CHECKS['lookup']} (the agent's submitted answer is not empty)."]
            return json.dumps({"families": [
                {"name": name, "router_description": router, "description": desc,
                 "verification_steps": STEPS + (lookup if kind == "lookup" else []), **SECTIONS,
                 "rubric_items": [{"name": "Outcome Reached", "criticality": "critical"}]}
                for name, (router, desc, kind) in FAMILIES.items()]})
        if "adapting a rubric bank" in text:
            m = re.findall(r"^(\w+):\n  description:", req.prompt, re.M)
            return json.dumps({"families": [{"name": n, "description": f"Rewritten for ShopDesk: {n}.",
                                             "verification_steps": ["Check the outcome in ShopDesk."]} for n in m]})
        if m := re.search(r"^FAMILY: (\w+)", req.prompt, re.M):  # the refine prompt
            fam = m.group(1)
            self.calls[fam] += 1
            kind = FAMILIES.get(fam, (None, None, None))[2]
            useless = (fam in self.useless_first and self.calls[fam] == 1) or kind is None
            last = "Be thorough." if useless else f"Check that the trajectory shows {CHECKS[kind]}."
            return json.dumps({"verification_steps": [*STEPS, last], **SECTIONS,
                               "rationale": f"{fam}: name the last step"})
        return "I do not understand the request."


def scripted_teacher(**kw) -> ScriptedEngine:
    """The scripted teacher as an engine."""
    return ScriptedEngine(ScriptedTeacher(**kw), name="scripted-teacher")
