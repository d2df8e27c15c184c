"""The one error the dev stack raises: something could not start or stop, and why."""

from __future__ import annotations


class DevstackError(RuntimeError):
    """A component of the local stack failed; the message names it and what to do next."""
