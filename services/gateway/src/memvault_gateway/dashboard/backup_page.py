"""Backup: the owner downloads a backup (with or without embeddings), restores one from an uploaded
file (asking first when that replaces the vault's memories), downloads the lossless export of the
conversation archive (a backup file of the archive's kinds only, which the same restore reads back), and
readable exports (md, json, jsonl). The same calls as /api/v1 (`api.backup`); the vault checks the owner's role again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse
from starlette.datastructures import UploadFile

from memvault.vault.v1 import archive_pb2 as apb
from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import vault_client as rpc
from memvault_core.errors import Conflict, InvalidArgument, PermissionDenied
from memvault_gateway.api import backup as api_backup
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, Owner, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

RESTORED = N_("The backup was restored: %(n)d memories.")
CHUNK = 64 * 1024
_MEDIA = {"md": "text/markdown", "json": "application/json", "jsonl": "application/x-ndjson"}


def _owner_only(person: Owner) -> None:
    if not person.is_owner:
        raise PermissionDenied("only the vault's owners back it up, restore or export it")


@router.get(PREFIX + "/{vault}/backup")
async def backup_page(
    vault: str, request: Request, gw: GatewayDep, restored: Annotated[int, Query(ge=-1)] = -1
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    held = conversations = 0
    archive = None
    if person.is_owner:
        stats = await gw.vault.call(
            rpc.VaultClient.get_stats, vpb.GetStatsRequest(vault=vault), person.caller.identity()
        )
        held = sum(stats.memories.values())
        archive = await _archive_stats(gw, person, vault)
        conversations = int(archive.conversations)
    notice = person.gettext(RESTORED) % {"n": restored} if restored >= 0 else ""
    return person.render(
        "backup.html",
        "backup",
        held=held,
        conversations=conversations,
        archive=archive,
        raw_mb=_mb(archive.raw_bytes) if archive else "0",
        notice=notice,
        confirm=False,
    )


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f}"


async def _archive_stats(gw: GatewayDep, person: Owner, vault: str) -> apb.GetArchiveStatsResponse:
    """The vault's archive totals (a restore replaces its conversations too; the export says what it holds)."""
    stats: apb.GetArchiveStatsResponse = await gw.vault.archive_call(
        "GetArchiveStats", apb.GetArchiveStatsRequest(vault=vault), person.caller.identity()
    )
    return stats


async def _conversations(gw: GatewayDep, person: Owner, vault: str) -> int:
    """Archived conversations in the vault (a restore replaces them too)."""
    return int((await _archive_stats(gw, person, vault)).conversations)


@router.get(PREFIX + "/{vault}/backup/download")
async def download(
    vault: str, request: Request, gw: GatewayDep, embeddings: Annotated[int, Query(ge=0, le=1)] = 1
) -> StreamingResponse:
    person = await owner(request, gw, vault)
    _owner_only(person)
    body = await api_backup.backup_chunks(gw, person.caller.identity(), vault, embeddings=bool(embeddings))
    return StreamingResponse(
        body,
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{api_backup.file_name(vault, "jsonl")}"'},
    )


@router.get(PREFIX + "/{vault}/backup/archive-export")
async def archive_export(vault: str, request: Request, gw: GatewayDep) -> StreamingResponse:
    """The conversation archive export (the backup format, archive kinds only), streamed as the vault reads it."""
    person = await owner(request, gw, vault)
    _owner_only(person)
    body = await api_backup.archive_export_chunks(gw, person.caller.identity(), vault)
    return StreamingResponse(
        body,
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{api_backup.file_name(vault + "-archive", "jsonl")}"'},
    )


@router.get(PREFIX + "/{vault}/backup/export")
async def export(
    vault: str, request: Request, gw: GatewayDep, format: Literal["md", "json", "jsonl"] = "md"
) -> StreamingResponse:
    person = await owner(request, gw, vault)
    _owner_only(person)
    body = await api_backup.export_chunks(gw, person.caller.identity(), vault, format)
    return StreamingResponse(
        body,
        media_type=_MEDIA[format],
        headers={"Content-Disposition": f'attachment; filename="{api_backup.file_name(vault, format)}"'},
    )


@router.post(PREFIX + "/{vault}/backup/restore", response_model=None)
async def restore(vault: str, request: Request, gw: GatewayDep) -> HTMLResponse | RedirectResponse:
    """Restore the uploaded file; into a vault that holds memories only with `replace=1`, which the
    confirmation page (shown when the vault refuses without it) sends."""
    person = await owner(request, gw, vault)
    _owner_only(person)
    form = await person.form()
    upload = form.get("file")
    if not isinstance(upload, UploadFile) or not upload.filename:
        raise InvalidArgument("choose a backup file to restore", field="file")
    replace = str(form.get("replace") or "") == "1"

    async def chunks() -> AsyncIterator[bytes]:
        while chunk := await upload.read(CHUNK):
            yield chunk

    try:
        result = await api_backup.restore_file(gw, person.caller.identity(), vault, chunks(), replace=replace)
    except Conflict as conflict:
        if replace:
            raise
        archive_only = "archive export" in conflict.message  # the file replaces the archive only
        stats = await gw.vault.call(
            rpc.VaultClient.get_stats, vpb.GetStatsRequest(vault=vault), person.caller.identity()
        )
        return person.render(
            "backup.html",
            "backup",
            held=sum(stats.memories.values()),
            conversations=await _conversations(gw, person, vault),
            notice="",
            confirm=True,
            archive_only=archive_only,
        )
    finally:
        await upload.close()
    return redirect(f"{person.url('backup')}?restored={int(result['restored'].get('memory', 0))}")
