"""Fixtures every test in the repository can use: postgres_dsn, nats_url, start_stack, chromium, browser_pages.

They live in memvault_devstack.fixtures and memvault_devstack.browser (typed and linted with the dev
stack); see their docstrings.
"""

pytest_plugins = ["memvault_devstack.fixtures", "memvault_devstack.browser"]
