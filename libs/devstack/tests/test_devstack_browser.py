"""The browser-test plugin: what a run says and how it ends when Chromium is missing or tests are skipped."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memvault_devstack.browser import find_chromium

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.integration
Runner = Callable[..., pytest.RunResult]

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = session
asyncio_default_test_loop_scope = session
markers =
    browser: pages in Chromium
"""

USES_CHROMIUM = """
import pytest

@pytest.mark.browser
async def test_page(chromium):
    page = await chromium.new_page()
    await page.set_content("<h1>memvault</h1>")
    assert await page.inner_text("h1") == "memvault"
"""

ONE_PASSES_ONE_SKIPS = """
import pytest

@pytest.mark.browser
def test_ran():
    pass

@pytest.mark.browser
def test_skipped():
    pytest.skip("not today")
"""

NO_BROWSER_TEST = """
def test_plain():
    pass
"""


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Callable[..., pytest.RunResult]:
    """Run `source` as a test file in a pytest of its own, with the plugin and `env`."""

    def run_source(source: str, **env: str) -> pytest.RunResult:
        pytester.makeini(INI)
        pytester.makepyfile(source)
        for name in ("MEMVAULT_TEST_CHROMIUM", "MEMVAULT_TEST_REQUIRE_BROWSER"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return pytester.runpytest_subprocess("-p", "memvault_devstack.browser")

    return run_source


def test_without_chromium_the_run_says_loudly_that_browser_tests_did_not_run(run: Runner) -> None:
    result = run(USES_CHROMIUM, MEMVAULT_TEST_CHROMIUM="/nonexistent/chromium")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*BROWSER TESTS WERE NOT RUN*", "*apt-get install chromium*"])


def test_without_chromium_a_run_that_requires_browser_tests_fails(run: Runner) -> None:
    result = run(USES_CHROMIUM, MEMVAULT_TEST_CHROMIUM="/nonexistent/chromium", MEMVAULT_TEST_REQUIRE_BROWSER="1")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*browser tests need Chromium*"])


def test_a_required_run_fails_when_one_browser_test_is_skipped(run: Runner) -> None:
    relaxed = run(ONE_PASSES_ONE_SKIPS)
    assert relaxed.ret == 0
    required = run(ONE_PASSES_ONE_SKIPS, MEMVAULT_TEST_REQUIRE_BROWSER="1")
    assert required.ret == pytest.ExitCode.TESTS_FAILED
    required.stdout.fnmatch_lines(["*a skipped browser test fails the run*"])


def test_a_required_run_fails_when_it_selects_no_browser_test(run: Runner) -> None:
    assert run(NO_BROWSER_TEST).ret == 0
    required = run(NO_BROWSER_TEST, MEMVAULT_TEST_REQUIRE_BROWSER="1")
    assert required.ret == pytest.ExitCode.TESTS_FAILED
    required.stdout.fnmatch_lines(["*NO BROWSER TESTS WERE SELECTED*"])


@pytest.mark.browser
def test_with_chromium_browser_tests_run_and_pass(run: Runner) -> None:
    if find_chromium() is None:
        pytest.skip("needs Chromium: apt-get install chromium")
    result = run(USES_CHROMIUM, MEMVAULT_TEST_REQUIRE_BROWSER="1")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*browser tests: 1 passed*"])
