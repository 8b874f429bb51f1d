"""Open a ``mage view`` report in headless Chromium and save a screenshot of it.

The browser test (tests/agent/test_view_browser.py) drives the page with these functions,
and the README's screenshot is made with them::

    mage train --output-dir runs/demo --iterations 80 --eval-meta-episodes 24
    python scripts/report_screenshot.py runs/demo docs/report_evaluation.png --selector "#evaluation .figures"
    python scripts/report_screenshot.py runs/demo docs/report_replay.png --selector "#replay" --steps 3

Needs playwright (the dev extra) and a Chromium on the machine (Debian: ``apt-get install
chromium``); playwright's own browser download is not used.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

#: Where a Chromium is looked for, in order (``MAGE_CHROMIUM`` names another).
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The path of a Chromium executable, or ``None``."""
    named = os.environ.get("MAGE_CHROMIUM")
    if named:
        return named if Path(named).exists() else None
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium (the system's, driven by playwright), closed after the block."""
    from playwright.sync_api import sync_playwright

    executable = find_chromium()
    if executable is None:
        raise RuntimeError("no Chromium found: apt-get install chromium, or set MAGE_CHROMIUM")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def report_page(path: str | Path, browser: Any = None, width: int = 1280,
                height: int = 900) -> Iterator[tuple[Any, list[str], list[str]]]:
    """The report at ``path`` open in ``browser`` (default: a Chromium of its own), once its
    script has run: the page, the console errors and uncaught exceptions so far (a list
    that grows), and every URL the page requested."""
    if browser is None:
        with chromium() as own:
            with report_page(path, own, width, height) as opened:
                yield opened
        return
    page = browser.new_page(viewport={"width": width, "height": height})
    try:
        errors: list[str] = []
        requests: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda request: requests.append(request.url))
        page.goto(Path(path).resolve().as_uri())
        page.wait_for_selector("body[data-ready=true]", timeout=20_000)
        yield page, errors, requests
    finally:
        page.close()


def screenshot(page: Any, out: str | Path, selector: str | None = None) -> Path:
    """Save a PNG of ``page``: the whole page, or the first element ``selector`` matches."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    if selector is None:
        page.screenshot(path=str(path), full_page=True)
    else:
        page.locator(selector).first.screenshot(path=str(path))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a run folder (its report.html is written first)")
    parser.add_argument("out", help="the PNG to write")
    parser.add_argument("--steps", type=int, default=2, help="replay steps to take before the picture")
    parser.add_argument("--selector", default=None, help="picture this element only (e.g. '#replay'; default: "
                        "the whole page)")
    args = parser.parse_args()
    from mage_envs.view import write_report

    report = write_report(args.run_dir)
    with report_page(report, height=1000) as (page, errors, _):
        for _ in range(args.steps):
            page.click("#step-next")
        screenshot(page, args.out, args.selector)
        if errors:
            raise SystemExit(f"the page reported errors: {errors}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
