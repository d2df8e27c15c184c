"""People who sign in: local accounts, accounts from an identity provider or a proxy, and their vaults.

Subjects (the vault's account keys) are chosen here. A local account's subject is its user name
(which never contains a colon); people who sign in elsewhere get `oidc:<sub>` or `proxy:<name>`,
so the namespaces cannot collide.
"""

from __future__ import annotations

import logging
import re
import secrets
import unicodedata
from datetime import timedelta

from email_validator import EmailNotValidError, validate_email

from memvault_core.errors import Conflict, InvalidArgument, MemvaultError
from memvault_core.names import owner_label
from memvault_gateway.auth import credentials
from memvault_gateway.context import Gateway
from memvault_gateway.store import User

log = logging.getLogger("memvault_gateway")

USERNAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
FIRST_VAULT = "default"
FORWARD_AUTH = "forward-auth"


def username_problem(username: str) -> str | None:
    if not USERNAME.match(username):
        return "a user name is 1 to 63 lower-case letters, digits, dots, dashes or underscores"
    return None


MAX_EMAIL_CHARS = 254  # RFC 5321's limit on a forward path


def normalized_email(text: str) -> str | None:
    """An email address as stored and looked up (lower-cased), or None when `text` is not one."""
    text = text.strip()
    if not text or len(text) > MAX_EMAIL_CHARS:
        return None
    try:
        # No DNS lookups; `.test` addresses are accepted (the tests' own, and never deliverable elsewhere).
        checked = validate_email(text, check_deliverability=False, test_environment=True)
    except EmailNotValidError:
        return None
    return checked.normalized.lower()


EMAIL_PROBLEM = "not an email address; write it as name@example.org"


MAX_DISPLAY_NAME_CHARS = 100
_JOINERS = ("\u200c", "\u200d")  # zero-width (non-)joiners: part of some scripts and emoji sequences
DISPLAY_NAME_PROBLEMS = {
    "empty": "display_name is empty; write the name others should see",
    "long": "display_name is %(n)d characters long; use at most %(max)d",
    "control": "display_name holds a control or invisible character (%(code)s); remove it",
}
"""What is wrong with a display name, by code (the dashboard has the same sentences in its catalogue)."""


def display_name_problem(raw: str) -> tuple[str, dict[str, object]] | None:
    """(code, values) of what is wrong with `raw` as a display name (`DISPLAY_NAME_PROBLEMS`), or None."""
    name = unicodedata.normalize("NFC", raw).strip()
    if not name:
        return "empty", {}
    if len(name) > MAX_DISPLAY_NAME_CHARS:
        return "long", {"n": len(name), "max": MAX_DISPLAY_NAME_CHARS}
    for char in name:
        category = unicodedata.category(char)
        if category in ("Cc", "Cs", "Co", "Cn", "Zl", "Zp") or (category == "Cf" and char not in _JOINERS):
            return "control", {"code": f"U+{ord(char):04X}"}
    return None


async def rename(gw: Gateway, user: User, raw: str) -> str:
    """Give the person the display name `raw` (checked: InvalidArgument says what to change), where the
    gateway shows it and in the vault (members lists); audited as `account.rename`. The name set."""
    problem = display_name_problem(raw)
    if problem is not None:
        code, values = problem
        raise InvalidArgument(DISPLAY_NAME_PROBLEMS[code] % values, field="display_name")
    name = unicodedata.normalize("NFC", raw).strip()
    await gw.vault.ensure_account(user.subject, name)  # first: if the vault is away, nothing has changed
    await gw.store.set_display_name(user.id, name)
    try:
        await gw.vault.audit(
            user.subject, "account.rename", target=user.subject, details={"from": user.display_name, "to": name}
        )
    except MemvaultError as error:
        log.error("audit entry not written", extra={"action": "account.rename", "error": error.kind})
    return name


def _vault_slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40]
    return slug or "vault"


async def ensure_vault_account(gw: Gateway, user: User) -> None:
    """Make sure the vault knows this person and that they have at least one vault of their own."""
    await gw.vault.ensure_account(user.subject, user.display_name)
    if await gw.vault.vaults(user.subject):
        return
    wanted = FIRST_VAULT if user.is_admin else _vault_slug(user.username or user.display_name or "vault")
    for name in (wanted, f"{wanted}-{secrets.token_hex(3)}", f"{wanted}-{secrets.token_hex(4)}"):
        try:
            await gw.vault.create_vault(user.subject, name)
            log.info("vault created for a new account", extra={"vault": name})
            return
        except Conflict:
            continue


async def owner_name(gw: Gateway) -> str:
    """Whose memory this gateway serves, as /connect names them: the first administrator."""
    admins = [u for u in await gw.store.list_users() if u.is_admin and not u.disabled]
    return (
        owner_label(admins[0].display_name or admins[0].username or "", "the vault owner")
        if admins
        else "the vault owner"
    )


async def create_local_user(
    gw: Gateway, username: str, *, display_name: str = "", is_admin: bool = False
) -> User | None:
    """A local account without a password yet; None when the name is taken."""
    return await gw.store.create_user(username, username=username, display_name=display_name, is_admin=is_admin)


async def new_setup_link(gw: Gateway, user: User) -> str:
    """A one-time link that lets `user` choose a password; replaces any earlier one."""
    token = credentials.new_token(credentials.SETUP_LINK)
    await gw.store.create_setup_link(
        user.id, credentials.token_hash(token), timedelta(hours=gw.settings.login.setup_link_hours)
    )
    return f"{gw.issuer}/setup/{token}"


async def external_user(
    gw: Gateway, provider: str, external_subject: str, *, prefix: str, display_name: str, create: bool
) -> User | None:
    """The person an identity provider or proxy vouches for, created on first sight if allowed."""
    user = await gw.store.user_by_external(provider, external_subject)
    if user is not None:
        return None if user.disabled else user
    subject = f"{prefix}:{external_subject}"
    user = await gw.store.user_by_subject(subject)
    if user is None:
        if not create:
            return None
        user = await gw.store.create_user(subject, username=None, display_name=display_name[:200])
        if user is None:  # created concurrently
            user = await gw.store.user_by_subject(subject)
            if user is None:
                return None
    await gw.store.link_external(provider, external_subject, user.id)
    return None if user.disabled else user
