"""The system's headless Chromium driven by playwright, for the browser tests (the review page, the docs
site): never a browser downloaded by playwright. `skip(why)` is the caller's: a skip, or a failure
where its environment requires the browser."""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium(skip: Callable[[str], None]) -> Iterator:
    """Yield a launched Chromium (a generator for a pytest fixture), or call `skip` saying what is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip("playwright is not installed (pip install -e '.[test]')")
    exe = os.environ.get("ADAPTRUBRIC_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        skip("no Chromium on PATH: apt-get install -y chromium (.ci/run installs it)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=FLAGS)
        yield b
        b.close()
