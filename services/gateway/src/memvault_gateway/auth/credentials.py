"""Making and checking credentials: random tokens stored as SHA-256, passwords as argon2id.

Tokens are opaque: a prefix naming what the token is (so a leaked one is easy to recognise
and scan for), then 256 random bits. Only their hash is stored, and every use looks the hash
up, so revocation takes effect on the next request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from authlib.oauth2.rfc7636 import create_s256_code_challenge  # type: ignore[import-untyped]

ACCESS_TOKEN = "mva_"  # noqa: S105 (token prefixes, not secrets)
REFRESH_TOKEN = "mvr_"  # noqa: S105
SERVICE_TOKEN = "mvs_"  # noqa: S105
AUTHORIZATION_CODE = "mvc_"
SESSION = "mvsess_"
SETUP_LINK = "mvsetup_"
CLIENT_SECRET = "mvcs_"  # noqa: S105

MIN_PASSWORD_CHARS = 12
MAX_PASSWORD_CHARS = 256
_VERIFIER = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")

# argon2-cffi's defaults follow RFC 9106's second recommended option (argon2id, 64 MiB, t=3).
_hasher = PasswordHasher()
# Checked against when the user does not exist, so a wrong name costs as long as a wrong password.
_DUMMY_HASH = _hasher.hash(secrets.token_urlsafe(16))


def new_token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What the database keeps instead of the token."""
    return hashlib.sha256(token.encode()).hexdigest()


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def check_password(password: str, password_hash: str | None) -> bool:
    """Constant-ish time whether or not there is a hash to check against."""
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def password_problem(password: str) -> str | None:
    """Why a new password is not acceptable, or None."""
    if len(password) < MIN_PASSWORD_CHARS:
        return f"use at least {MIN_PASSWORD_CHARS} characters (a few unrelated words work well)"
    if len(password) > MAX_PASSWORD_CHARS:
        return f"use at most {MAX_PASSWORD_CHARS} characters"
    return None


def valid_code_verifier(verifier: str) -> bool:
    return bool(_VERIFIER.match(verifier))


def pkce_matches(verifier: str, challenge: str) -> bool:
    """RFC 7636 S256: BASE64URL(SHA256(verifier)) == challenge."""
    return valid_code_verifier(verifier) and hmac.compare_digest(create_s256_code_challenge(verifier), challenge)


def same_secret(given: str, stored_hash: str | None) -> bool:
    return stored_hash is not None and hmac.compare_digest(token_hash(given), stored_hash)
