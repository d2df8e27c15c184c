"""End-to-end tests start whole stacks as processes. Each takes `fresh_stack` (memvault_devstack.fixtures):
a database of its own per stack, since the dev owner and its vault are fixed names."""
