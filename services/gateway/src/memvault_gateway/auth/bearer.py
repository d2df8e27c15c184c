"""Checking a bearer token at a protected resource (/mcp, /api/v1) and answering with RFC 6750 challenges."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import JSONResponse

from memvault_core.identity import Identity
from memvault_gateway.auth import credentials, scopes
from memvault_gateway.context import Gateway
from memvault_gateway.web.http import problem


@dataclass(frozen=True)
class Principal:
    """Who is calling and what they may do, as the gateway tells mcp and the vault."""

    subject: str
    client: str
    scopes: tuple[str, ...]
    vaults: tuple[str, ...]
    grant_id: str | None = None

    def identity(self) -> Identity:
        return Identity(subject=self.subject, client=self.client, scopes=frozenset(self.scopes), vaults=self.vaults)


class BearerError(Exception):
    """A refused request, with the challenge that tells the client how to get a good token."""

    def __init__(self, status: int, error: str | None, description: str, scope: str | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description
        self.scope = scope

    def response(self, gw: Gateway, resource: str) -> JSONResponse:
        parts = ['Bearer realm="memvault"', f'resource_metadata="{gw.resource_metadata_url(resource)}"']
        parts.append(f'scope="{self.scope or " ".join(scopes.DEFAULT_SCOPES)}"')
        if self.error:
            parts.append(f'error="{self.error}"')
            parts.append(f'error_description="{self.description}"')
        title = {400: "Bad request", 401: "Unauthorized", 403: "Forbidden"}[self.status]
        return problem(self.status, title, self.description, headers={"WWW-Authenticate": ", ".join(parts)})


def bearer_token(request: Request) -> str | None:
    """The token in `Authorization: Bearer`, or None if there is no such header.

    Tokens in the query string or a form body are refused outright (they end up in logs).
    """
    if "access_token" in request.query_params:
        raise BearerError(400, "invalid_request", "send the access token in the Authorization header, never in the URL")
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise BearerError(401, "invalid_token", "use 'Authorization: Bearer <token>'")
    return value.strip()


async def verify(gw: Gateway, token: str, resource: str) -> Principal:
    """The principal behind `token` if it is live and meant for `resource`; BearerError otherwise."""
    record = await gw.store.token(credentials.token_hash(token)) if len(token) < 200 else None
    if record is None or record.kind == "refresh":
        raise BearerError(401, "invalid_token", "the access token is not valid; sign in again")
    if not record.usable:
        raise BearerError(401, "invalid_token", "the access token has expired or was revoked")
    if record.kind == "access" and record.resource != resource:
        raise BearerError(401, "invalid_token", "the access token was issued for another resource")
    return Principal(
        subject=record.subject,
        client=record.grant.name if record.kind == "access" else f"{record.grant.name} (service token)",
        scopes=record.scopes,
        vaults=record.grant.vaults,
        grant_id=record.grant.id,
    )
