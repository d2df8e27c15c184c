"""The tool an agent calls first: the owner's operating guide, the vaults it can use, the limits."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context

from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core.vault_client import VaultClient
from memvault_mcp.tools.arguments import VaultArg
from memvault_mcp.tools.registry import READ_ONLY, ask_vault, tool

NEWER_DEFAULT_GUIDE = (
    "This memvault ships a newer default operating guide than the one this vault uses. Mention it "
    "to the owner once: they can compare and adopt it through the JSON API "
    "(POST /api/v1/vaults/<vault>/guide/adopt-default), or save their own guide to dismiss this notice."
)


@tool(
    "Get operating guide",
    "Read this first in every conversation: the owner's rules for when to recall, what to save and what "
    "never to save, the vaults you can use, and capabilities: every limit enforced, versions, features.",
    READ_ONLY,
)
async def get_operating_guide(ctx: Context, vault: VaultArg = "") -> dict[str, Any]:
    guide = await ask_vault(ctx, VaultClient.get_operating_guide, vpb.GetOperatingGuideRequest(vault=vault))
    listing = await ask_vault(ctx, VaultClient.list_vaults, vpb.ListVaultsRequest())
    caps = await ask_vault(ctx, VaultClient.get_capabilities, vpb.GetCapabilitiesRequest())
    answer: dict[str, Any] = {
        "vault": guide.vault,
        "guide": guide.text,
        "guide_version": guide.version,
        "vaults": [{"name": v.name, "role": v.role, "approval_mode": v.approval_mode} for v in listing.vaults],
        "limits": {field.name: value for field, value in caps.limits.ListFields()} | dict(caps.more_limits),
        # The capabilities answer: these limits are the constants the server enforces.
        "capabilities": {
            "protocol_version": ctx.protocol_version,
            "capabilities_version": caps.capabilities_version,
            "features": dict(sorted(caps.features.items())),
        },
    }
    if guide.newer_default_available:
        answer["newer_default_guide"] = NEWER_DEFAULT_GUIDE
    return answer
