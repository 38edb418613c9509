"""A screenshot of a review page as a browser shows it (the system's headless Chromium, driven by
playwright), for the docs. `docs/review.png` is a labelling session on `make demo`'s page: the
first three cards labelled with the keys (1, 0, u), a note written on the second, which is current,
taken with

    make demo && python eval/review_screenshot.py runs/demo/eval/adapter/review.html docs/review.png --session

The PNG is reduced to a 256-colour palette (about a third of the bytes; the page has few colours).
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
NOTE = "the note is there but the title is wrong: 'Shoping' (the verifier missed it)"


def label_session(tab) -> None:
    """Label the first cards by key, go back to the second and write a note on it."""
    for key in ("1", "0", "u"):
        tab.keyboard.press("j")
        tab.keyboard.press(key)
    tab.keyboard.press("k")
    tab.keyboard.press("e")
    tab.keyboard.type(NOTE)
    tab.keyboard.press("Escape")
    tab.wait_for_timeout(200)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("page", help="review.html")
    ap.add_argument("out", help="PNG to write")
    ap.add_argument("--fragment", default="", help="e.g. '#id=t008_c2' to open one card")
    ap.add_argument("--size", default="1280x800", help="viewport WxH (default 1280x800, a laptop's)")
    ap.add_argument("--session", action="store_true", help="label a few cards first (a labelling session)")
    ap.add_argument("--full-colour", action="store_true", help="keep the PNG in full colour")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    w, h = (int(x) for x in args.size.split("x"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=FLAGS)
        tab = browser.new_page(viewport={"width": w, "height": h})
        tab.goto(Path(args.page).resolve().as_uri() + args.fragment)
        tab.wait_for_selector('#cards[data-state="ready"]')
        tab.wait_for_function("() => Array.from(document.images).every(i => i.complete)")
        if args.session:
            label_session(tab)
        tab.screenshot(path=args.out)
        browser.close()
    if not args.full_colour:
        from PIL import Image

        with Image.open(args.out) as im:
            im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(args.out, optimize=True)
    print(f"wrote {args.out} ({Path(args.out).stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
