"""Pytest fixtures for tests marked `browser`: Debian's Chromium driven by Playwright for Python.

- `chromium` (session): one headless Chromium, launched from `MEMVAULT_TEST_CHROMIUM` or the
  first of /usr/bin/chromium and `chromium` on PATH, with the flags that keep it quiet on a
  machine without internet. Playwright never downloads a browser of its own here
  (`playwright install` cannot work offline); each context it opens starts from a fresh, empty
  user-data directory that Playwright creates and removes.
- `browser_pages` (per test): `await browser_pages.new()` opens a page in a context of its own
  (its own cookies: one person). Every page it opens saves a screenshot of each page it loads,
  and of where it ended, under `build/screenshots/<test name>/`; `await page_shots.shot(page,
  "label")` adds one.

Without Chromium, browser tests are skipped and the run ends with a banner saying they were not
run and how to get them, unless `MEMVAULT_TEST_REQUIRE_BROWSER=1` (CI's `make test`), where a
missing Chromium fails them, and a run that selects no browser test or skips any fails as a whole.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page

CHROMIUM_ENV = "MEMVAULT_TEST_CHROMIUM"
REQUIRE_ENV = "MEMVAULT_TEST_REQUIRE_BROWSER"
SCREENSHOT_DIR = Path("build/screenshots")
# What the machines here need: no sandbox as root, no GPU, and none of Chromium's own calls home,
# which a closed network refuses many at a time.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
INSTALL_HINT = "install it with `apt-get install chromium` (Debian) or set MEMVAULT_TEST_CHROMIUM=/path/to/chromium"

_outcomes = {"selected": 0, "passed": 0, "skipped": 0, "failed": 0}


def find_chromium() -> str | None:
    """The Chromium executable to drive, or None."""
    named = os.environ.get(CHROMIUM_ENV)
    if named:
        return named if Path(named).is_file() else None
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def browser_required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0", "false")


@pytest.fixture(scope="session")
async def chromium() -> AsyncIterator[Browser]:
    """One headless Chromium for the whole session."""
    executable = find_chromium()
    if executable is None:
        where = os.environ.get(CHROMIUM_ENV) or "/usr/bin/chromium or chromium on PATH"
        message = f"browser tests need Chromium ({where} not found): {INSTALL_HINT}"
        if browser_required():
            pytest.fail(message)
        pytest.skip(message)
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        message = "browser tests need Playwright for Python: `make install` installs it (requirements-dev.txt)"
        if browser_required():
            pytest.fail(message)
        pytest.skip(message)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=executable, headless=True, args=list(CHROMIUM_FLAGS[1:])
        )
        try:
            yield browser
        finally:
            await browser.close()


def _slug(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-")[:60] or "page"


class PageShots:
    """Opens pages for one test and keeps a screenshot of every page they load."""

    def __init__(self, browser: Browser, directory: Path) -> None:
        self.browser = browser
        self.directory = directory
        self.contexts: list[BrowserContext] = []
        self.pages: list[Page] = []
        self.saved: list[Path] = []
        self._pending: set[asyncio.Future[Path | None]] = set()
        self._count = 0

    async def new(self, *, phone: bool = False, locale: str = "en-US", **options: Any) -> Page:
        """A page in a fresh context (its own cookies); `phone` gives a 390x844 touch viewport."""
        if phone:
            options.setdefault("viewport", {"width": 390, "height": 844})
            options.setdefault("is_mobile", True)
            options.setdefault("has_touch", True)
        else:
            options.setdefault("viewport", {"width": 1200, "height": 900})
        context = await self.browser.new_context(locale=locale, **options)
        self.contexts.append(context)
        page = await context.new_page()
        self.pages.append(page)
        page.on("load", self._loaded)
        return page

    def _loaded(self, page: Page) -> None:
        path = page.url.split("://", 1)[-1].partition("/")[2].split("?", 1)[0]
        # Long path segments are tokens (setup links, ids): not in file names.
        label = "-".join(part if len(part) < 24 else "x" for part in path.split("/")) or "home"
        task = asyncio.ensure_future(self.shot(page, label))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def shot(self, page: Page, label: str) -> Path | None:
        """Save a full-page screenshot named after `label`; None if the page has gone."""
        self._count += 1
        path = self.directory / f"{self._count:02d}-{_slug(label)}.png"
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            await page.screenshot(path=str(path), full_page=True)
        except Exception:  # the page navigated away or closed mid-shot: the next load is kept instead
            return None
        self.saved.append(path)
        return path

    async def close(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        for page in self.pages:
            if not page.is_closed():
                await self.shot(page, "end")
        for context in self.contexts:
            await context.close()


@pytest.fixture
async def browser_pages(chromium: Browser, request: pytest.FixtureRequest) -> AsyncIterator[PageShots]:
    """Pages for this test; screenshots go to build/screenshots/<test name>/."""
    # Names are cut short for the file system; the node id's hash keeps similar names apart.
    digest = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]
    directory = SCREENSHOT_DIR / f"{_slug(request.node.name)}-{digest}"
    shutil.rmtree(directory, ignore_errors=True)
    shots = PageShots(chromium, directory)
    try:
        yield shots
    finally:
        await shots.close()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "browser" not in report.keywords:
        return
    if report.when == "call" and report.passed:
        _outcomes["passed"] += 1
    elif report.skipped:
        _outcomes["skipped"] += 1
    elif report.failed:
        _outcomes["failed"] += 1


def pytest_sessionstart(session: pytest.Session) -> None:
    _outcomes.update(dict.fromkeys(_outcomes, 0))


def pytest_collection_finish(session: pytest.Session) -> None:
    _outcomes["selected"] = sum(1 for item in session.items if item.get_closest_marker("browser"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With MEMVAULT_TEST_REQUIRE_BROWSER, a run fails unless browser tests ran and none was skipped."""
    if browser_required() and exitstatus == 0 and (not _outcomes["selected"] or _outcomes["skipped"]):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    required = browser_required()
    if not _outcomes["selected"]:
        if required:
            terminalreporter.write_sep("!", "NO BROWSER TESTS WERE SELECTED", red=True, bold=True)
            terminalreporter.write_line(f"{REQUIRE_ENV} is set and this run selected no browser test, so it fails.")
        return
    if _outcomes["skipped"]:
        terminalreporter.write_sep("!", "BROWSER TESTS WERE NOT RUN", red=True, bold=True)
        terminalreporter.write_line(
            f"{_outcomes['skipped']} of {_outcomes['selected']} browser test(s) skipped; if Chromium or Playwright is"
            f" missing: {INSTALL_HINT}."
        )
        if required:
            terminalreporter.write_line(f"{REQUIRE_ENV} is set, so a skipped browser test fails the run.")
        return
    terminalreporter.write_line(
        f"browser tests: {_outcomes['passed']} passed; screenshots in {SCREENSHOT_DIR}/<test name>/"
    )
