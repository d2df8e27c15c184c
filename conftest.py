"""Fixtures every test in the repository can use: postgres_dsn, nats_url, start_stack.

They live in memvault_devstack.fixtures (typed and linted with the dev stack); see its docstring.
"""

pytest_plugins = ["memvault_devstack.fixtures"]
