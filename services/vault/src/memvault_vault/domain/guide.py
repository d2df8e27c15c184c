"""The operating guide every agent reads first, and the default a new vault starts from."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Guide:
    vault: str
    text: str
    version: int


def default_text() -> str:
    return resources.files("memvault_vault").joinpath("default_guide.md").read_text(encoding="utf-8")


def default_revision() -> str:
    """Identifies the bundled default, so a vault can tell when a newer one ships."""
    return hashlib.sha256(default_text().encode()).hexdigest()[:12]
