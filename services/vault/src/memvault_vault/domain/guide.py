"""The operating guide every agent reads first, and the default a new vault starts from."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from memvault_core import limits
from memvault_core.errors import InvalidArgument, LimitExceeded
from memvault_core.names import owner_label


@dataclass(frozen=True)
class Guide:
    vault: str
    text: str
    version: int


OWNER_PLACEHOLDER = "{owner}"


def _template() -> str:
    return resources.files("memvault_vault").joinpath("default_guide.md").read_text(encoding="utf-8")


def default_text(owner: str = "") -> str:
    """The bundled default guide, naming the vault's owner (their display name)."""
    return _template().replace(OWNER_PLACEHOLDER, owner_label(owner, "its owner"))


def default_revision() -> str:
    """Identifies the bundled default, so a vault can tell when a newer one ships (whoever it names)."""
    return hashlib.sha256(_template().encode()).hexdigest()[:12]


def validate_text(text: str) -> str:
    """A guide the owner saves: not empty, within max_guide_chars, and with no secrets in it."""
    from memvault_vault.domain.inputs import check_secret

    text = text.strip()
    if not text:
        raise InvalidArgument(
            "text is empty; write the rules agents should follow, or adopt the default guide", field="text"
        )
    if len(text) > limits.MAX_GUIDE_CHARS:
        raise LimitExceeded(
            f"text is {len(text):,} characters; the limit is {limits.MAX_GUIDE_CHARS:,} (max_guide_chars). "
            "Agents read it in every conversation, so keep it short",
            field="text",
            limit=limits.MAX_GUIDE_CHARS,
        )
    check_secret(text, field_name="text")
    return text + "\n"
