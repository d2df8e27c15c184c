"""Imports: paste markdown or plain text, or upload a mem0 / basic-memory / memvault JSON Lines file;
see what became of each item, browse past batches, undo one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from memvault_core import interchange, limits
from memvault_core.errors import InvalidArgument
from memvault_gateway.api import imports as api_imports
from memvault_gateway.api import shapes as api_shapes
from memvault_gateway.context import Gateway
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

PAGE_SIZE = 20
UNDONE = N_("Import undone: %(removed)d removed, %(restored)d put back.")


async def _page(
    vault: str,
    request: Request,
    gw: Gateway,
    cursor: str = "",
    result: dict[str, object] | None = None,
    notice: str = "",
    text: str = "",
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    history = await api_imports.batches(vault, person.caller, gw, limit=PAGE_SIZE, cursor=cursor)
    return person.render(
        "imports.html",
        "imports",
        batches=history["batches"],
        next_cursor=history["next_cursor"],
        result=result,
        notice=notice,
        text=text,
        types=list(api_shapes.MemoryType.__args__),  # type: ignore[attr-defined]
    )


@router.get(PREFIX + "/{vault}/imports")
async def imports(
    vault: str,
    request: Request,
    gw: GatewayDep,
    cursor: Annotated[str, Query(max_length=2000)] = "",
    removed: int = -1,
    restored: int = 0,
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    notice = person.gettext(UNDONE) % {"removed": removed, "restored": restored} if removed >= 0 else ""
    return await _page(vault, request, gw, cursor, notice=notice)


@router.post(PREFIX + "/{vault}/imports")
async def paste(vault: str, request: Request, gw: GatewayDep) -> HTMLResponse:
    """Split the pasted text into memories as one batch, and show each item's outcome on the same page."""
    person = await owner(request, gw, vault)
    form = await person.form()
    text = str(form.get("text") or "")
    upload = form.get("file")
    file_format = str(form.get("format") or "text")
    if file_format in interchange.FORMATS:
        if upload is None or isinstance(upload, str) or not upload.filename:
            raise InvalidArgument(f"choose a file to import as {file_format}", field="file")
        raw = await upload.read(limits.MAX_REQUEST_BYTES + 1)
        if len(raw) > limits.MAX_REQUEST_BYTES:
            raise InvalidArgument(f"{upload.filename}: over {limits.MAX_REQUEST_BYTES} bytes", field="file")
        name = upload.filename[:200]
        result = await api_imports.import_file(gw, person.caller, vault, file_format, name, raw)
        return await _page(vault, request, gw, result=result)
    if file_format != "text":
        raise InvalidArgument(f"unknown file format {file_format[:40]!r}", field="format")
    if upload is not None and not isinstance(upload, str) and upload.filename:
        raw = await upload.read(limits.MAX_IMPORT_TEXT_CHARS * 4 + 1)
        text = raw.decode("utf-8", errors="replace")
    body = api_shapes.BulkIn.model_validate(
        {
            "vault": vault,
            "text": text,
            "type": str(form.get("type") or "fact"),
            "source": str(form.get("source") or "dashboard import"),
        }
    )
    result = await api_imports.bulk(body, person.caller, gw)
    return await _page(vault, request, gw, result=result)


@router.post(PREFIX + "/{vault}/imports/{batch_id}/undo")
async def undo(vault: str, batch_id: str, request: Request, gw: GatewayDep) -> Response:
    person = await owner(request, gw, vault)
    await person.form()
    answer = await api_imports.undo(vault, batch_id[:100], person.caller, gw)
    return redirect(f"{person.url('imports')}?removed={answer['removed']}&restored={answer['restored']}")
