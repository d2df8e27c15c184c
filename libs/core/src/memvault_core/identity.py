"""The short-lived internal identity the gateway signs and mcp and vault check.

The indexer signs its own service identity (another audience) with the same key.

An agent's access token never travels past the gateway. Instead the gateway
signs who is calling (subject), through which client, with which scopes and for
which vaults; mcp and vault trust nothing else. The signature is HMAC-SHA256
over a JWT, with a fixed issuer and audience and a short expiry.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import OctKey

from memvault_core.errors import PermissionDenied, Unauthenticated

HTTP_HEADER = "X-Memvault-Identity"
GRPC_METADATA_KEY = "x-memvault-identity"
ISSUER = "memvault-gateway"
AUDIENCE = "memvault-internal"
SERVICE_AUDIENCE = "memvault-service"
"""Services calling each other (the indexer reading from the vault, the vault searching the indexer)
use this audience, so a service identity is never mistaken for a user's, nor a user's for a service's."""
SCOPES = ("read", "write", "admin")


def missing_scope_message(tool: str, needed: str, held: Iterable[str]) -> str:
    """What an agent reads when `tool` needs a scope its connection lacks (the gateway and mcp say the same).

    Approving the app again replaces its grant, so the owner needs no revoke step first.
    """
    has = ", ".join(s for s in SCOPES if s in set(held)) or "none"
    return (
        f"{tool} needs the '{needed}' scope, which this connection was not granted (it has: {has}). "
        f"Only the vault owner can grant it: they connect this app again and approve '{needed}'."
    )


@dataclass(frozen=True)
class Identity:
    subject: str
    client: str = ""
    scopes: frozenset[str] = field(default_factory=frozenset)
    vaults: tuple[str, ...] = ()
    """Vault names this grant reaches; empty means every vault the subject holds a role in."""

    def require(self, scope: str) -> None:
        """Raise PermissionDenied unless this identity holds `scope` (admin implies write implies read)."""
        implied = {"read": {"read", "write", "admin"}, "write": {"write", "admin"}, "admin": {"admin"}}
        if not self.scopes & implied[scope]:
            raise PermissionDenied(
                f"this connection lacks the '{scope}' scope; ask the vault owner to grant it "
                f"(it has: {', '.join(sorted(self.scopes)) or 'none'})"
            )

    def allows_vault(self, name: str) -> bool:
        return not self.vaults or name in self.vaults

    @property
    def actor(self) -> str:
        """Who to name in the audit log."""
        return f"mcp:{self.client}" if self.client else f"user:{self.subject}"


class IdentitySigner:
    """Signs and verifies internal identities with one shared secret."""

    def __init__(self, secret: str, ttl_seconds: int = 120) -> None:
        self._key = OctKey.import_key(secret.encode())
        self._ttl = ttl_seconds

    def sign(self, identity: Identity) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": identity.subject,
            "iat": now,
            "exp": now + self._ttl,
            "client": identity.client,
            "scopes": sorted(identity.scopes),
            "vaults": list(identity.vaults),
        }
        return jwt.encode({"alg": "HS256"}, claims, self._key)

    def sign_service(self, service: str) -> str:
        """A short-lived identity for one service calling another."""
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "aud": SERVICE_AUDIENCE,
            "sub": f"service:{service}",
            "iat": now,
            "exp": now + self._ttl,
        }
        return jwt.encode({"alg": "HS256"}, claims, self._key)

    def verify_service(self, token: str | None, *services: str) -> None:
        """Raise Unauthenticated unless `token` is a valid identity of one of `services`."""
        allowed = " or ".join(services)
        if not token:
            raise Unauthenticated(f"no service identity: only the {allowed} may call this")
        try:
            decoded = jwt.decode(token, self._key, algorithms=["HS256"])
            jwt.JWTClaimsRegistry(
                iss={"essential": True, "value": ISSUER},
                aud={"essential": True, "value": SERVICE_AUDIENCE},
                sub={"essential": True, "values": [f"service:{service}" for service in services]},
                exp={"essential": True},
            ).validate(decoded.claims)
        except (JoseError, ValueError) as error:
            raise Unauthenticated(
                f"the service identity is invalid or expired: only the {allowed} may call this"
            ) from error

    def verify(self, token: str | None) -> Identity:
        if not token:
            raise Unauthenticated("no internal identity: calls must come through the memvault gateway")
        try:
            decoded = jwt.decode(token, self._key, algorithms=["HS256"])
            jwt.JWTClaimsRegistry(
                iss={"essential": True, "value": ISSUER},
                aud={"essential": True, "value": AUDIENCE},
                sub={"essential": True},
                exp={"essential": True},
            ).validate(decoded.claims)
        except (JoseError, ValueError) as error:
            raise Unauthenticated("the internal identity is invalid or expired") from error
        claims = decoded.claims
        scopes = claims.get("scopes", [])
        vaults = claims.get("vaults", [])
        if not isinstance(scopes, list) or not isinstance(vaults, list):
            raise Unauthenticated("the internal identity is malformed")
        return Identity(
            subject=str(claims["sub"]),
            client=str(claims.get("client", "")),
            scopes=frozenset(str(s) for s in scopes if s in SCOPES),
            vaults=tuple(str(v) for v in vaults),
        )
