"""An agent's access token through the gateway's real OAuth flow (drills and the load test)."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx


def access_token(gateway: str, resource: str) -> str:
    """An access token through the gateway's real OAuth flow (dynamic registration, PKCE, consent
    approved for the owner by MEMVAULT_GATEWAY__TEST_AUTO_APPROVE_SUBJECT, loopback only)."""
    redirect_uri = "http://127.0.0.1:9/callback"  # never contacted: the code is read from the redirect
    client_id = httpx.post(
        f"{gateway}/register",
        json={
            "client_name": f"drill agent {secrets.token_hex(2)}",
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        },
        timeout=30,
    ).json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": resource,
        "scope": "read write",
    }
    answer = httpx.get(f"{gateway}/authorize?{urlencode(query)}", timeout=30)
    code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
    tokens = httpx.post(
        f"{gateway}/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "code_verifier": verifier,
            "redirect_uri": redirect_uri,
            "client_id": client_id,
            "resource": resource,
        },
        timeout=30,
    )
    tokens.raise_for_status()
    return str(tokens.json()["access_token"])
