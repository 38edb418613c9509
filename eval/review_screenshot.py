"""A screenshot of a review page as a browser shows it (the system's headless Chromium, driven by
playwright), for the docs: `docs/review.png` is `make demo`'s page taken with

    make demo && python eval/review_screenshot.py runs/demo/eval/adapter/review.html docs/review.png
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("page", help="review.html")
    ap.add_argument("out", help="PNG to write")
    ap.add_argument("--fragment", default="", help="e.g. '#id=t008_c2' to open one card")
    ap.add_argument("--size", default="1280x900", help="viewport WxH (default 1280x900)")
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
        tab.screenshot(path=args.out)
        browser.close()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
