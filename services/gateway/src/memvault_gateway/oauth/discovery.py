"""Discovery documents: authorization server metadata (RFC 8414), protected resources (RFC 9728)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from memvault_core.identity import SCOPES
from memvault_gateway.context import Gateway, gateway
from memvault_gateway.web.http import problem

router = APIRouter()


def authorization_server_metadata(gw: Gateway) -> dict[str, Any]:
    issuer = gw.issuer
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "registration_endpoint": f"{issuer}/register",
        "revocation_endpoint": f"{issuer}/revoke",
        "scopes_supported": list(SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "revocation_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": True,
        "client_id_metadata_document_supported": gw.settings.oauth.metadata_documents,
        "service_documentation": f"{issuer}/connect",
    }


def protected_resource_metadata(gw: Gateway, resource: str) -> dict[str, Any]:
    return {
        "resource": resource,
        "authorization_servers": [gw.issuer],
        "scopes_supported": list(SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": "memvault",
        "resource_documentation": f"{gw.issuer}/connect",
    }


@router.get("/.well-known/oauth-authorization-server{suffix:path}")
async def authorization_server(suffix: str, gw: Gateway = Depends(gateway)) -> JSONResponse:  # noqa: B008
    # With an issuer that has a path (https://host/memvault) the RFC 8414 URL inserts the
    # well-known part before it: /.well-known/oauth-authorization-server/memvault.
    if suffix.rstrip("/") not in ("", urlsplit(gw.issuer).path.rstrip("/")):
        return problem(404, "Not found", "this gateway's issuer is " + gw.issuer)
    return JSONResponse(authorization_server_metadata(gw), headers={"Cache-Control": "max-age=300"})


@router.get("/.well-known/oauth-protected-resource{suffix:path}")
async def protected_resource(suffix: str, request: Request, gw: Gateway = Depends(gateway)) -> JSONResponse:  # noqa: B008
    resources = {
        gw.mcp_resource.removeprefix(gw.origin): gw.mcp_resource,
        gw.api_resource.removeprefix(gw.origin): gw.api_resource,
    }
    # The bare well-known URL describes the MCP endpoint, for clients that only look there.
    resource = gw.mcp_resource if suffix in ("", "/") else resources.get(suffix.rstrip("/"))
    if resource is None:
        return problem(404, "Not found", f"no protected resource at {suffix[:100]!r}; the MCP endpoint is /mcp")
    return JSONResponse(protected_resource_metadata(gw, resource), headers={"Cache-Control": "max-age=300"})
