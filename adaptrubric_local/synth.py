"""Synthetic GUI trajectories with labels known by construction, for demos, tests and benchmarks.

Draws phone-like screens with PIL for every task family and writes canonical JSONL. Each task has
several candidates (same `task_id` and instruction); each failure is one of the paper's failure
modes. With `visible_outcome`, the final screen carries a large green "Done" / red "Not done" banner,
so even a tiny model can tell success from failure. Knows nothing about models.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from .types import Step, Trajectory


@dataclass
class Screen:
    """What one synthetic screen shows."""

    app: str
    rows: list[str] = field(default_factory=list)
    toggles: list[tuple[str, bool]] = field(default_factory=list)
    input_text: str | None = None
    bubbles: list[str] = field(default_factory=list)
    dialog: str | None = None
    keyboard: bool = False


@cache
def _font(px: int):
    try:
        return ImageFont.load_default(size=px)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


def draw(screen: Screen, size: tuple[int, int]) -> Image.Image:
    """Render a Screen to an RGB image of `size` (width, height)."""
    w, h = size
    u = max(1, h // 100)  # layout unit
    im = Image.new("RGB", size, (250, 250, 250))
    d = ImageDraw.Draw(im)
    f, fb = _font(max(8, 3 * u)), _font(max(9, 4 * u))
    d.rectangle([0, 0, w, 3 * u], fill=(30, 30, 30))
    d.text((u, 0), "12:00", fill=(255, 255, 255), font=_font(max(6, 2 * u)))
    hue = sum(map(ord, screen.app)) % 200
    d.rectangle([0, 3 * u, w, 10 * u], fill=(40 + hue // 2, 90, 160 - hue // 3))
    d.text((2 * u, 4 * u), screen.app, fill=(255, 255, 255), font=fb)
    y = 12 * u
    for row in screen.rows:
        d.rectangle([u, y, w - u, y + 6 * u], outline=(200, 200, 200))
        d.text((2 * u, y + u), row, fill=(20, 20, 20), font=f)
        y += 7 * u
    for label, on in screen.toggles:
        d.text((2 * u, y + u), label, fill=(20, 20, 20), font=f)
        x0 = w - 14 * u
        d.rounded_rectangle([x0, y + u, x0 + 10 * u, y + 5 * u], radius=2 * u,
                            fill=(40, 160, 60) if on else (170, 170, 170))
        knob = x0 + (6 * u if on else 0)
        d.ellipse([knob, y + u, knob + 4 * u, y + 5 * u], fill=(255, 255, 255))
        d.text((x0 - 8 * u, y + u), "ON" if on else "OFF", fill=(20, 20, 20), font=f)
        y += 7 * u
    for b in screen.bubbles:
        d.rounded_rectangle([w // 3, y, w - u, y + 6 * u], radius=2 * u, fill=(60, 130, 230))
        d.text((w // 3 + u, y + u), b, fill=(255, 255, 255), font=f)
        y += 7 * u
    if screen.input_text is not None:
        top = h - (40 if screen.keyboard else 12) * u
        d.rectangle([u, top, w - 12 * u, top + 8 * u], outline=(80, 80, 80), fill=(255, 255, 255))
        d.text((2 * u, top + 2 * u), screen.input_text, fill=(0, 0, 0), font=f)
        d.rectangle([w - 11 * u, top, w - u, top + 8 * u], fill=(60, 130, 230))
        d.text((w - 10 * u, top + 2 * u), "Send", fill=(255, 255, 255), font=f)
    if screen.keyboard:
        d.rectangle([0, h - 30 * u, w, h], fill=(210, 210, 215))
        for r in range(3):
            for c in range(10):
                d.rectangle([c * w // 10 + 2, h - 28 * u + r * 9 * u, (c + 1) * w // 10 - 2, h - 21 * u + r * 9 * u],
                            fill=(255, 255, 255))
    if screen.dialog:
        d.rectangle([w // 8, h // 3, w - w // 8, h // 2], fill=(255, 255, 255), outline=(0, 0, 0), width=max(1, u // 2))
        d.text((w // 8 + 2 * u, h // 3 + 2 * u), screen.dialog, fill=(0, 0, 0), font=f)
        d.text((w - w // 8 - 12 * u, h // 2 - 6 * u), "OK", fill=(30, 90, 200), font=fb)
    return im


# A task is: family, instruction, and a function (success, rng) -> (steps as (screen, action), answer).
# Each builder's failure branch is one of the paper's failure modes. A step's action_type is its action's
# function name, or the name ACTION_TYPES gives it; a type() step's text is its argument.
Built = tuple[list[tuple[Screen, str]], str | None]
ACTION_TYPES = {"finish": "answer", "press_back": "back", "press_home": "home", "swipe": "scroll", "quote": "read"}


def _home(rng) -> Screen:
    return Screen("Home", rows=["Messages", "Settings", "Notes", "Files", "Clock", "Contacts"][: rng.randint(4, 6)])


def _note_top(v: dict, ok: bool, rng: random.Random) -> Built:
    old = "Water the plants while I am away."
    final = [v["text"], old] if ok else [old, v["text"]]
    return ([(_home(rng), "open_app('Notes')"),
             (Screen("Notes", rows=[v["note"], "groceries.txt"]), f"tap('{v['note']}')"),
             (Screen(v["note"], rows=[old], keyboard=True), f"type('{v['text']}')"),
             (Screen(v["note"], rows=final, keyboard=True), "tap('Save')"),
             (Screen(v["note"], rows=final), "finish()")], None)


def _send(v: dict, fail: str, ok: bool, rng: random.Random) -> Built:
    to = v["to"] if ok or fail != "wrong_recipient" else v["other"]
    steps = [(_home(rng), "open_app('Messages')"),
             (Screen("Messages", rows=[v["other"], v["to"], "Alex"]), f"tap('{to}')"),
             (Screen(to, bubbles=["hi"], input_text="", keyboard=True), f"type('{v['msg']}')")]
    if ok or fail == "wrong_recipient":
        steps += [(Screen(to, bubbles=["hi"], input_text=v["msg"], keyboard=True), "tap('Send')"),
                  (Screen(to, bubbles=["hi", v["msg"]], input_text=""), "finish()")]
    else:  # draft left unsent
        steps += [(Screen(to, bubbles=["hi"], input_text=v["msg"], keyboard=True), "press_back()"),
                  (Screen(to, bubbles=["hi"], input_text=v["msg"]), "finish()")]
    return steps, None


def _delete_all(v: dict, ok: bool, rng: random.Random) -> Built:
    items = [f"{v['item']} $4", "Lunch $12", f"{v['item']} $3", "Taxi $20"]
    steps = [(_home(rng), "open_app('Expenses')"), (Screen("Expenses", rows=items), f"long_press('{items[0]}')"),
             (Screen("Expenses", rows=items, dialog="Delete 1 item?"), "tap('OK')")]
    after = items[1:]
    if ok:
        steps += [(Screen("Expenses", rows=after), f"long_press('{after[1]}')"),
                  (Screen("Expenses", rows=after, dialog="Delete 1 item?"), "tap('OK')")]
        after = [r for r in after if not r.startswith(v["item"])]
    return [*steps, (Screen("Expenses", rows=after), "finish()")], None  # failure: one of "all" left


def _toggle(v: dict, ok: bool, rng: random.Random) -> Built:
    others = [("Airplane mode", False), ("Location", True)]
    return [(_home(rng), "open_app('Settings')"),
            (Screen("Settings", rows=["Network", "Connected devices", "Display"]), "tap('Connected devices')"),
            (Screen("Connected devices", toggles=[(v["setting"], False), *others]), f"tap('{v['setting']}')"),
            # failure: page visited, toggle tapped, state not changed
            (Screen("Connected devices", toggles=[(v["setting"], ok), *others]), "finish()")], None


def _answer(v: dict, ok: bool, rng: random.Random) -> Built:
    answer = str(v["n"]) if ok else f"There were {v['n']} people in the meeting"  # wrong format
    rows = [f"{v['n']} individuals were present", "Agenda: review"]
    return [(_home(rng), "open_app('Notes')"), (Screen("Notes", rows=[v["note"], "Budget"]), f"tap('{v['note']}')"),
            (Screen(v["note"], rows=rows), f"quote('{rows[0]}')"),
            (Screen(v["note"], rows=rows), f"finish(answer='{answer}')")], answer


def _move(v: dict, ok: bool, rng: random.Random) -> Built:
    src = [v["file"], "photo.jpg", "notes.md"]
    dst_rows = [v["file"]] if ok else ["(empty)"]  # failure: source read, destination left empty
    return [(_home(rng), "open_app('Files')"), (Screen("Files: Desktop", rows=src), f"long_press('{v['file']}')"),
            (Screen("Files: Desktop", rows=src, dialog="Move to..."), "tap('Move to')"),
            (Screen(f"Files: {v['dst']}", rows=["(empty)"]), "tap('Move here')"),
            (Screen(f"Files: {v['dst']}", rows=dst_rows), "finish()")], None


def _composite(v: dict, ok: bool, rng: random.Random) -> Built:
    steps = [(_home(rng), "open_app('Settings')"),
             (Screen("Network", toggles=[("Wi-Fi", False), ("Mobile data", True)]), "tap('Wi-Fi')"),
             (Screen("Network", toggles=[("Wi-Fi", True), ("Mobile data", True)]), "press_home()")]
    if ok:
        return [*steps, (_home(rng), f"open_app('{v['app']}')"),
                (Screen(v["app"], rows=["Recent", "Favourites", "Keypad"]), "finish()")], None
    return [*steps, (_home(rng), "finish()")], None  # second sub-goal dropped


def _stopwatch(v: dict, ok: bool, rng: random.Random) -> Built:
    start, run = ("tap('Start')", ["00:05.12", "Pause"]) if ok else ("tap('Reset')", ["00:00.00", "Start"])
    return [(_home(rng), "open_app('Clock')"),
            (Screen("Clock", rows=["Alarm", "Timer", "Stopwatch"]), "tap('Stopwatch')"),
            (Screen("Stopwatch", rows=["00:00.00", "Start"]), start), (Screen("Stopwatch", rows=run), "finish()")], None


def task_bank(rng: random.Random, i: int) -> tuple[str, str, Callable]:
    """The i-th synthetic task: (family, instruction, builder), cycling through all 8 families."""
    names = ["Ana", "Ben", "Chen", "Dana", "Eli", "Fay", "Gus", "Hana"]
    k, fam = divmod(i, 8)
    if fam == 0:
        v = {"note": f"note_{k}.txt", "text": f"Hello {names[k % 8]}!"}
        return "create_modify", f"Add the text '{v['text']}' to the top of {v['note']} in Notes.", partial(_note_top, v)
    if fam == 1:
        v = {"to": names[k % 8], "other": names[(k + 3) % 8], "msg": f"See you at {k % 12 + 1} pm"}
        return "communication", f"Send a text message to {v['to']} saying '{v['msg']}'.", partial(
            _send, v, "draft" if k % 2 == 0 else "wrong_recipient")
    if fam == 2:
        v = {"item": ["Coffee", "Snacks", "Parking"][k % 3]}
        return "delete_cleanup", f"Delete all expenses named {v['item']} in the Expenses app.", partial(_delete_all, v)
    if fam == 3:
        v = {"setting": ["Bluetooth", "NFC", "Hotspot"][k % 3]}
        return "state_navigation", f"Turn on {v['setting']}.", partial(_toggle, v)
    if fam == 4:
        v = {"note": f"Meeting {k}", "n": 10 + k * 3}
        return ("info_query", f"How many attendees were present in the meeting titled '{v['note']}' in the Notes "
                "app? Express your answer as just a single number.", partial(_answer, v))
    if fam == 5:
        v = {"file": f"todo_{k}.txt", "dst": "done"}
        return "transfer", f"Move the file {v['file']} on the Desktop to the folder done.", partial(_move, v)
    if fam == 6:
        v = {"app": ["Phone", "Contacts", "Camera"][k % 3]}
        return "composite_workflow", f"Turn on Wi-Fi, then open the {v['app']} app.", partial(_composite, v)
    return "general", "Run the stopwatch.", partial(_stopwatch, {})


def outcome_banner(im: Image.Image, ok: bool) -> Image.Image:
    """Cover a final screen below its status bar with a result card: green "Done" or red "Not done"."""
    w, h = im.size
    d = ImageDraw.Draw(im)
    d.rectangle([0, max(1, h // 100) * 3, w, h], fill=(40, 170, 70) if ok else (200, 40, 40))
    d.text((w // 8, h * 2 // 3), "Done" if ok else "Not done", fill=(255, 255, 255), font=_font(max(9, h // 12)))
    return im


@dataclass
class SynthConfig:
    """What `synth` writes: how many tasks and candidates, the screen size, the seed, the banner."""

    tasks: int = field(default=16, metadata={"help": "distinct tasks, cycling through the 8 task families"})
    candidates: int = field(default=4, metadata={"help": "candidates per task (the same task_id and instruction; "
                                                         "about half of them succeed)"})
    size: str = field(default="360x800", metadata={"metavar": "WxH", "help": "screen size in pixels"})
    seed: int = field(default=0, metadata={"help": "random seed: the same seed writes the same data"})
    visible_outcome: bool = field(default=False, metadata={
        "help": "cover each final screen with the outcome (green \"Done\" / red \"Not done\" banner), as `demo` "
                "and `make-tiny-model --answering` train on (with --size 96x192)"})

    def __post_init__(self) -> None:
        if self.tasks < 1 or self.candidates < 1:
            raise ValueError(f"--tasks and --candidates must be >= 1, got {self.tasks} and {self.candidates}")
        parts = self.size.lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"--size must be WIDTHxHEIGHT in pixels (e.g. 360x800), got {self.size!r}")

    @property
    def wh(self) -> tuple[int, int]:
        """(width, height) of --size."""
        w, h = self.size.lower().split("x")
        return int(w), int(h)


def synthesize(out: Path, n_tasks: int = 16, candidates: int = 4, size: tuple[int, int] = (360, 800),
               seed: int = 0, platform: str = "android", visible_outcome: bool = False) -> Path:
    """Write `n_tasks` x `candidates` labelled trajectories under `out`; returns the JSONL path.
    `visible_outcome`: the final screen shows the outcome as a large coloured banner."""
    from .formats import canonical

    out = Path(out)
    (out / "screens").mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    trajs = []
    for i in range(n_tasks):
        _family, instruction, build = task_bank(rng, i)
        labels = [j % 2 for j in range(candidates)]
        random.Random(seed * 1000 + i).shuffle(labels)
        for j, ok in enumerate(labels):
            built, answer = build(bool(ok), random.Random(seed * 7919 + i * 31 + j))
            pad = random.Random(i * 13 + j).randint(0, 2)  # a few idle steps, so lengths differ
            built = [(_home(rng), "swipe(direction='up')")] * pad + built
            steps = []
            for n, (screen, action) in enumerate(built):
                path = out / "screens" / f"t{i:03d}_c{j}_s{n:02d}.png"
                im = draw(screen, size)
                if visible_outcome and n == len(built) - 1:
                    im = outcome_banner(im, bool(ok))
                im.save(path, optimize=False, compress_level=1)
                name = action.split("(", 1)[0]
                text = action[6:-2] if name == "type" else None
                steps.append(Step(str(path.resolve()), action, ACTION_TYPES.get(name, name), text))
            trajs.append(Trajectory(id=f"t{i:03d}_c{j}", instruction=instruction, steps=steps, answer=answer,
                                    platform=platform, task_id=f"t{i:03d}", label=int(ok)))
    path = out / "trajectories.jsonl"
    canonical.write(trajs, path)
    return path
