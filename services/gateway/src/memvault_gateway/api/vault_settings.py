"""/api/v1 per-vault settings, the operating guide and its versions, and the vault's audit log. Acts
as the caller, like `memories`."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query

from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import limits, wire
from memvault_core import vault_client as rpc
from memvault_gateway.api.access import Caller, GatewayDep, Vault
from memvault_gateway.api.shapes import AuditLimit, Before, GuideIn, ListLimit, SettingsIn, Time, VersionIn, vault_call

router = APIRouter(prefix="/api/v1")


def _settings_json(settings: vpb.VaultSettings) -> dict[str, Any]:
    return {
        "approval_mode": settings.approval_mode,
        "superseded_retention_days": settings.superseded_retention_days,
        "rejected_retention_days": settings.rejected_retention_days,
        "audit_retention_days": settings.audit_retention_days,
    }


@router.get("/vaults/{vault}/settings")
async def get_settings(vault: Vault, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    response = await vault_call(gw, rpc.VaultClient.get_settings, vpb.GetSettingsRequest(vault=vault), caller)
    return {"vault": response.vault, **_settings_json(response.settings)}


@router.put("/vaults/{vault}/settings")
async def put_settings(vault: Vault, body: SettingsIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Change the approval mode (review or auto) and retention periods; fields left out stay as they are."""
    request = vpb.UpdateSettingsRequest(vault=vault, approval_mode=body.approval_mode or "")
    for name in ("superseded_retention_days", "rejected_retention_days", "audit_retention_days"):
        if (value := getattr(body, name)) is not None:
            setattr(request, name, value)
    response = await vault_call(gw, rpc.VaultClient.update_settings, request, caller)
    return {"vault": response.vault, **_settings_json(response.settings)}


def _guide_json(response: vpb.GetOperatingGuideResponse) -> dict[str, Any]:
    return {
        "vault": response.vault,
        "text": response.text,
        "version": response.version,
        "updated_by": response.updated_by,
        "updated_at": wire.iso_for_api(response, "updated_at"),
        "newer_default_available": response.newer_default_available,
        "default_revision": response.default_revision,
        "default_text": response.default_text or None,
    }


@router.get("/vaults/{vault}/guide")
async def get_guide(vault: Vault, caller: Caller, gw: GatewayDep, include_default: bool = False) -> dict[str, Any]:
    """The guide agents read first; `include_default` adds the bundled default to compare with."""
    request = vpb.GetOperatingGuideRequest(vault=vault, include_default=include_default)
    return _guide_json(await vault_call(gw, rpc.VaultClient.get_operating_guide, request, caller))


@router.put("/vaults/{vault}/guide")
async def put_guide(vault: Vault, body: GuideIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Save a new version of the guide (send the version you edited as expected_version)."""
    request = vpb.UpdateOperatingGuideRequest(vault=vault, text=body.text, expected_version=body.expected_version)
    response = await vault_call(gw, rpc.VaultClient.update_operating_guide, request, caller)
    return {"vault": response.vault, "version": response.version}


@router.post("/vaults/{vault}/guide/adopt-default")
async def adopt_default_guide(vault: Vault, body: VersionIn, caller: Caller, gw: GatewayDep) -> dict[str, Any]:
    """Replace the guide with the default this deployment ships (a new version; the old ones are kept)."""
    request = vpb.UpdateOperatingGuideRequest(vault=vault, adopt_default=True, expected_version=body.expected_version)
    response = await vault_call(gw, rpc.VaultClient.update_operating_guide, request, caller)
    return {"vault": response.vault, "version": response.version}


@router.get("/vaults/{vault}/guide/versions")
async def guide_versions(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    limit: ListLimit = limits.DEFAULT_LIST_RESULTS,
    before_version: Before = 0,
    include_text: bool = False,
) -> dict[str, Any]:
    request = vpb.ListGuideVersionsRequest(
        vault=vault, limit=limit, before_version=before_version, include_text=include_text
    )
    response = await vault_call(gw, rpc.VaultClient.list_guide_versions, request, caller)
    return {
        "vault": response.vault,
        "versions": [
            {
                "version": v.version,
                "updated_by": v.updated_by,
                "updated_at": wire.iso_for_api(v, "updated_at"),
                "chars": v.chars,
                **({"text": v.text} if include_text else {}),
            }
            for v in response.versions
        ],
    }


@router.get("/vaults/{vault}/audit")
async def vault_audit(
    vault: Vault,
    caller: Caller,
    gw: GatewayDep,
    actor: Annotated[str, Query(max_length=limits.MAX_KEY_CHARS)] = "",
    action: Annotated[
        str, Query(max_length=limits.MAX_KEY_CHARS, description="An action, or a prefix ending in '.'")
    ] = "",
    target: Annotated[str, Query(max_length=limits.MAX_KEY_CHARS)] = "",
    since: Time | None = None,
    until: Time | None = None,
    limit: AuditLimit = 50,
    before: Before = 0,
) -> dict[str, Any]:
    """Who did what in this vault, newest first (owners only): filter by actor, action, target and time."""
    request = vpb.ListVaultAuditRequest(
        vault=vault,
        actor=actor,
        action=action,
        target=target,
        since=wire.to_timestamp(since),
        until=wire.to_timestamp(until),
        limit=limit,
        before_id=before,
    )
    response = await vault_call(gw, rpc.VaultClient.list_vault_audit, request, caller)
    return {
        "vault": response.vault,
        "entries": [
            {
                "id": e.id,
                "actor": e.actor,
                "action": e.action,
                "target": e.target,
                "details": json.loads(e.details_json or "{}"),
                "at": wire.iso_for_api(e, "at"),
            }
            for e in response.entries
        ],
        "next_before": response.next_before_id or None,
    }
