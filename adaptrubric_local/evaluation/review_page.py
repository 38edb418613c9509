"""Writes the review page: `review.html` and a `review_files/` folder beside it, viewable offline.

- `review_files/index.js`: one short row per trajectory that the page filters, sorts and searches, and
  the prompt paragraphs several cards share, once;
- `review_files/cards/NNNNN.js`: the full cards, `CHUNK` per file, loaded only for the page shown;
- `review_files/thumbs/*.jpg`: thumbnails of the selected screenshots, each linking to its original;
- `review_files/review.js`, `review_labels.js`, `review.css`: the page's code, copied from the package.

All trajectory text travels as JSON data and is put on the page with `textContent`, never as HTML; the
Content-Security-Policy allows scripts from the page's own folder only. A page written with --labels
carries those files' labels and notes for its cards in the index's meta (`labels`). Knows nothing
about how cards are built (see `review`).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from .review import OUTCOMES, outcome_counts

CHUNK = 25  # cards per data file
THUMB_BOX = (240, 240)  # a thumbnail fits in this box (pixels)
THUMB_QUALITY = 70  # JPEG quality
FILES = "review_files"
ASSETS = ("review.js", "review_labels.js", "review.css")
SHARED_PART = 20  # a prompt paragraph at least this long that two cards hold is stored once


def _js(obj) -> str:
    """JSON that is safe inside a script file and an HTML page ('<' and line separators escaped)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _finite(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def thumb_name(path: str) -> str:
    """A thumbnail's file name: from the screenshot's path, size and modification time."""
    try:
        st = os.stat(path)
        key = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    except OSError:
        key = path
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:20] + ".jpg"


def make_thumbnail(src: str, dest: Path, box: tuple[int, int] = THUMB_BOX) -> str | None:
    """Write a JPEG thumbnail of `src` (kept if already there); None, or why it could not be made."""
    if dest.is_file():
        return None
    from PIL import Image

    try:
        with Image.open(src) as im:
            im.draft("RGB", box)  # JPEG sources decode at a reduced size
            im = im.convert("RGB")
            im.thumbnail(box)
            tmp = dest.with_suffix(".tmp")
            im.save(tmp, "JPEG", quality=THUMB_QUALITY, optimize=True)
            os.replace(tmp, dest)
    except FileNotFoundError:
        return "screenshot file not found"
    except Exception as exc:  # a corrupt image becomes a visible note on its card, not a failed page
        return f"screenshot could not be read ({type(exc).__name__})"
    return None


def make_thumbnails(paths: list[str], folder: Path,
                    progress: bool = False) -> dict[str, tuple[str | None, str | None]]:
    """path -> (thumbnail file name or None, why not), made in a thread pool."""
    from tqdm import tqdm

    folder.mkdir(parents=True, exist_ok=True)
    unique = list(dict.fromkeys(paths))
    names = {p: thumb_name(p) for p in unique}
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        results = pool.map(lambda p: make_thumbnail(p, folder / names[p]), unique)
        return {p: (None, err) if err else (names[p], None) for p, err in tqdm(
            zip(unique, results), total=len(unique), desc="thumbnails", unit="img", disable=not progress,
            dynamic_ncols=True)}


def _href(path: str, out: Path) -> str:
    """A link from the page's folder to `path` (absolute when they are on different drives)."""
    try:
        path = os.path.relpath(str(path), str(out.resolve()))
    except ValueError:
        path = str(path)
    return quote(path.replace(os.sep, "/"))


def _page_card(c: dict, thumbs: dict, out: Path) -> dict:
    """A card with page-relative links and thumbnails in place of absolute paths."""
    c = dict(c)
    selected = []
    for f in c["selected"]:
        name, why = thumbs.get(f["path"], (None, "no thumbnail"))
        selected.append({"step": f["step"], "reason": f["reason"], "action": f["action"], "href": _href(f["path"], out),
                         "thumb": f"{FILES}/thumbs/{name}" if name else None, "missing": why})
    c["selected"] = selected
    c["left_out"] = [{"step": f["step"], "action": f["action"], "why": f["why"], "href": _href(f["path"], out)}
                     for f in c["left_out"]]
    for k in ("p_success", "p_success_calibrated", "error_confidence"):
        c[k] = _finite(c.get(k))
    return c


def share_prompt_parts(cards: list[dict]) -> list[str]:
    """Store the prompt paragraphs several cards hold once: each card's prompt text becomes a list of
    paragraphs ("\n\n"-separated, so joining them gives the text back exactly), a shared one named by
    its index in the returned list; the suffix likewise. Changes the cards' "prompt" in place."""
    counts = Counter(part for c in cards if c.get("prompt")
                     for part in set(c["prompt"]["text"].split("\n\n")) | {c["prompt"]["suffix"]})
    shared = [t for t, n in counts.items() if n > 1 and len(t) >= SHARED_PART]
    at = {t: i for i, t in enumerate(shared)}
    for c in cards:
        if p := c.get("prompt"):
            c["prompt"] = {"text": [at.get(x, x) for x in p["text"].split("\n\n")],
                           "suffix": at.get(p["suffix"], p["suffix"]), "images": p["images"]}
    return shared


def _row(i: int, c: dict) -> list:
    """The index row the page filters and sorts on."""
    return [c["id"], c["instruction"] or "", c["platform"] or "unknown", c["family"] or "(none)", c["status"],
            c["outcome"], _finite(c["p_success"]), _finite(c["error_confidence"]), c["label"], c["score"], i // CHUNK]


def write_review(out: str | Path, cards: list[dict], meta: dict | None = None, notes: list[str] | None = None,
                 progress: bool = False) -> Path:
    """Write review.html and review_files/ into `out`; returns the page's path."""
    out = Path(out)
    files = out / FILES
    (files / "cards").mkdir(parents=True, exist_ok=True)
    for old in (files / "cards").glob("*.js"):
        old.unlink()
    thumbs = make_thumbnails([f["path"] for c in cards for f in c["selected"]], files / "thumbs", progress)
    used = {name for name, _ in thumbs.values() if name}
    for stale in (files / "thumbs").glob("*.jpg"):  # thumbnails of an earlier page over other data
        if stale.name not in used:
            stale.unlink()
    page_cards = [_page_card(c, thumbs, out) for c in cards]
    index = {"meta": meta or {}, "notes": notes or [], "n": len(cards), "chunk": CHUNK,
             "counts": outcome_counts(c["outcome"] for c in cards), "prompt_parts": share_prompt_parts(page_cards),
             "outcomes": list(OUTCOMES), "rows": [_row(i, c) for i, c in enumerate(page_cards)],
             "columns": ["id", "instruction", "platform", "family", "status", "outcome", "p_success",
                         "error_confidence", "label", "score", "chunk"]}
    (files / "index.js").write_text(f"window.REVIEW_INDEX = {_js(index)};\n", encoding="utf-8")
    for k in range(0, len(page_cards), CHUNK):
        (files / "cards" / f"{k // CHUNK:05d}.js").write_text(
            f"window.REVIEW_CHUNK({k // CHUNK}, {_js(page_cards[k:k + CHUNK])});\n", encoding="utf-8")
    assets = resources.files("adaptrubric_local.evaluation") / "review_assets"
    for name, dest in [*((name, files / name) for name in ASSETS), ("review.html", out / "review.html")]:
        dest.write_text((assets / name).read_text(encoding="utf-8"), encoding="utf-8")
    return out / "review.html"


def page_labels(reviewed: dict, ids: list[str], files: list[dict], created: str | None) -> dict | None:
    """What the page shows of the labels files (`labels.reviewed`) on its cards, as if the reviewer had
    imported them when the page was written: each card's label (1/0/null), note, the verdict's score and
    p_success when labelled, and the time; `token` names this writing of the page, so a reload keeps what
    the reviewer changes on it since."""
    on_page = {i: reviewed[i] for i in ids if i in reviewed}
    if not files:
        return None
    token = hashlib.sha256(json.dumps([[f["sha256"] for f in files], created, sorted(on_page)]).encode()).hexdigest()
    return {"token": token[:16], "files": [Path(f["path"]).name for f in files],
            "marks": {i: {k: getattr(r, k) for k in ("label", "note", "score", "p_success", "time")}
                      for i, r in on_page.items()}}


def folder_bytes(out: str | Path) -> int:
    """Bytes of review.html and review_files/ (for the README's size per 1,000 trajectories)."""
    out = Path(out)
    total = (out / "review.html").stat().st_size if (out / "review.html").is_file() else 0
    for root, _, names in os.walk(out / FILES):
        total += sum(os.path.getsize(os.path.join(root, n)) for n in names)
    return total
