"""Archive: the vault's archived conversations (titles, tags, counts, paged), archive totals, uploads of a
ChatGPT or Claude.ai export with a progress line and the failures, one conversation read at a pinned
revision with its revisions, and deleting one after typing its id. The same ArchiveService calls as
/api/v1 (`api.archive`); the vault applies the caller's role to each."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.datastructures import UploadFile

from memvault.vault.v1 import archive_pb2 as pb
from memvault_core.errors import Conflict, InvalidArgument, LimitExceeded
from memvault_gateway.api import archive as api_archive
from memvault_gateway.dashboard.common import (
    PREFIX,
    DashboardRoute,
    GatewayDep,
    Owner,
    form_number,
    owner,
    redirect,
)
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

PAGE_SIZE = 20
MESSAGES_PER_PAGE = 50
REVISIONS_SHOWN = 50
IMPORTS_SHOWN = 10
FORMATS = ("chatgpt", "claude")
MAX_TAGS = 20
TAGS_SAVED = N_("Tags saved.")
STALE_TAGS = N_(
    "Nothing was saved: the tags changed since you opened this page (someone else edited them). The current"
    " tags are shown below; your edit was: %(yours)s. Make your change again on the current tags."
)
DELETED = N_("Conversation deleted with %(revisions)d revisions and %(messages)d messages.")
INDEX_RETRIED = N_("%(n)d messages sent to the indexer again.")
RETRIED = N_(
    "The import was queued again: it resumes from its last checkpoint, then tries its failed conversations again."
)


def _summary(c: pb.ConversationSummary) -> dict[str, Any]:
    return {
        "id": c.id,
        "title": c.title if c.has_title else None,
        "tags": list(c.tags),
        "tags_version": c.tags_version,
        "head_revision": c.head_revision,
        "message_count": c.message_count,
        "source": c.source,
        "updated_at": c.updated_at.ToDatetime().strftime("%Y-%m-%d %H:%M") if c.HasField("updated_at") else "",
    }


def _import(status: pb.ImportStatus) -> dict[str, Any]:
    row = api_archive.import_json(status)
    row["format"] = status.format
    row["created_at"] = (
        status.created_at.ToDatetime().strftime("%Y-%m-%d %H:%M") if status.HasField("created_at") else ""
    )
    return row


def _size(n: int) -> str:
    """Bytes as a person reads them (decimal units, as file managers show sizes)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


async def _call(person: Owner, method: str, request: object) -> Any:
    return await person.gw.vault.archive_call(method, request, person.caller.identity())


@router.get(PREFIX + "/{vault}/archive")
async def archive(
    vault: str,
    request: Request,
    gw: GatewayDep,
    cursor: Annotated[str, Query(max_length=2000)] = "",
    tag: Annotated[str, Query(max_length=64)] = "",
    tags: Annotated[str, Query(max_length=1400)] = "",
    match: Annotated[Literal["all", "any"], Query()] = "all",
    deleted_revisions: Annotated[int, Query(ge=-1)] = -1,
    deleted_messages: Annotated[int, Query(ge=0)] = 0,
    index_retried: Annotated[int, Query(ge=-1)] = -1,
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    wanted = parse_tags(f"{tags} {tag}")
    stats = await _call(person, "GetArchiveStats", pb.GetArchiveStatsRequest(vault=vault))
    listed = await _call(
        person,
        "ListConversations",
        pb.ListConversationsRequest(
            vault=vault,
            limit=PAGE_SIZE,
            cursor=cursor,
            tags_all=wanted if match == "all" else [],
            tags_any=wanted if match == "any" else [],
        ),
    )
    imports = await _call(person, "ListImports", pb.ListImportsRequest(vault=vault, limit=IMPORTS_SHOWN))
    notice = ""
    if deleted_revisions >= 0:
        notice = person.gettext(DELETED) % {"revisions": deleted_revisions, "messages": deleted_messages}
    elif index_retried >= 0:
        notice = person.gettext(INDEX_RETRIED) % {"n": index_retried}
    return person.render(
        "archive.html",
        "archive",
        stats=stats,
        raw_size=_size(stats.raw_bytes),
        conversations=[_summary(c) for c in listed.conversations],
        next_cursor=listed.next_cursor,
        tags=" ".join(wanted),
        match=match,
        imports=[_import(i) for i in imports.imports],
        notice=notice,
        formats=FORMATS,
    )


@router.post(PREFIX + "/{vault}/archive/imports", response_model=None)
async def upload(vault: str, request: Request, gw: GatewayDep) -> RedirectResponse:
    """The chosen export goes to the vault in parts, as `memvault import` sends it; then its progress page."""
    person = await owner(request, gw, vault)
    form = await person.form()
    file = form.get("file")
    fmt = str(form.get("format") or "chatgpt")
    if fmt not in FORMATS:
        raise InvalidArgument(f"format must be one of: {', '.join(FORMATS)}", field="format")
    if not isinstance(file, UploadFile) or not file.filename:
        raise InvalidArgument("choose an export file (conversations.json or the export's zip)", field="file")
    try:
        digest, size = hashlib.sha256(), 0
        while block := await file.read(1 << 20):
            digest.update(block)
            size += len(block)
        if size == 0:
            raise InvalidArgument(f"{file.filename[:200]} is empty", field="file")
        await file.seek(0)
        started = await _call(
            person,
            "StartImport",
            pb.StartImportRequest(
                vault=vault, format=fmt, filename=file.filename[:200], size=size, sha256=digest.hexdigest()
            ),
        )
        import_id = getattr(started, "import").id
        part = 0
        while block := await file.read(api_archive.MAX_PART_BYTES):
            await _call(
                person,
                "UploadImportPart",
                pb.UploadImportPartRequest(vault=vault, import_id=import_id, part=part, data=block),
            )
            part += 1
        await _call(person, "FinishImport", pb.FinishImportRequest(vault=vault, import_id=import_id))
    finally:
        await file.close()
    return redirect(f"{person.url('archive')}/imports/{import_id}")


@router.get(PREFIX + "/{vault}/archive/imports/{import_id}")
async def import_progress(
    vault: str,
    import_id: str,
    request: Request,
    gw: GatewayDep,
    retried: Annotated[int, Query(ge=0, le=1)] = 0,
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    response = await _call(person, "GetImport", pb.GetImportRequest(vault=vault, import_id=import_id))
    job = _import(getattr(response, "import"))
    retryable = job["state"] == "failed" or (job["state"] == "done" and job["failed"] > 0)
    return person.render(
        "archive_import.html",
        "archive",
        job=job,
        retryable=retryable,
        notice=person.gettext(RETRIED) if retried else "",
    )


@router.post(PREFIX + "/{vault}/archive/imports/{import_id}/retry", response_model=None)
async def retry_import(vault: str, import_id: str, request: Request, gw: GatewayDep) -> RedirectResponse:
    """Retry a failed import (owners; the vault refuses an import that did not fail and says why)."""
    person = await owner(request, gw, vault)
    await person.form()
    await api_archive.retry_import(gw, person.caller.identity(), vault, import_id)
    return redirect(f"{person.url('archive')}/imports/{import_id}?retried=1")


@router.post(PREFIX + "/{vault}/archive/index/retry", response_model=None)
async def retry_message_index(vault: str, request: Request, gw: GatewayDep) -> RedirectResponse:
    """Send every failed message index job of the vault to the indexer again (owners)."""
    person = await owner(request, gw, vault)
    await person.form()
    reply = await _call(person, "RetryMessageIndex", pb.RetryMessageIndexRequest(vault=vault))
    return redirect(f"{person.url('archive')}?index_retried={reply.retried}")


@router.get(PREFIX + "/{vault}/archive/c/{conversation_id}")
async def conversation(
    vault: str,
    conversation_id: str,
    request: Request,
    gw: GatewayDep,
    revision: Annotated[int, Query(ge=0)] = 0,
    cursor: Annotated[str, Query(max_length=2000)] = "",
    graph: Annotated[int, Query(ge=0, le=1)] = 0,
    tags_saved: Annotated[int, Query(ge=0, le=1)] = 0,
    revisions_cursor: Annotated[str, Query(max_length=2000)] = "",
) -> HTMLResponse:
    """One conversation at a pinned revision (the head unless one is chosen), its messages paged, and its
    revisions newest first, REVISIONS_SHOWN a page (`revisions_cursor` pages to older ones)."""
    person = await owner(request, gw, vault)
    notice = person.gettext(TAGS_SAVED) if tags_saved else ""
    return await _conversation_page(
        person, conversation_id, revision, cursor, graph, notice=notice, revisions_cursor=revisions_cursor
    )


async def _conversation_page(
    person: Owner,
    conversation_id: str,
    revision: int = 0,
    cursor: str = "",
    graph: int = 0,
    status: int = 200,
    notice: str = "",
    tag_error: str = "",
    revisions_cursor: str = "",
) -> HTMLResponse:
    vault = person.vault_name
    view = pb.CONVERSATION_VIEW_GRAPH if graph else pb.CONVERSATION_VIEW_ACTIVE
    body = await _call(
        person,
        "GetConversation",
        pb.GetConversationRequest(
            vault=vault,
            conversation_id=conversation_id,
            revision=revision,
            view=view,
            limit=MESSAGES_PER_PAGE,
            cursor=cursor,
        ),
    )
    revisions = await _call(
        person,
        "ListRevisions",
        pb.ListRevisionsRequest(
            vault=vault, conversation_id=conversation_id, limit=REVISIONS_SHOWN, cursor=revisions_cursor
        ),
    )
    return person.render(
        "conversation.html",
        "archive",
        status,
        c=_summary(body.conversation),
        revision=body.revision,
        messages=[
            {
                "role": m.role,
                "content_type": m.content_type,
                "text": m.text,
                "node_id": m.node_id,
                "active": m.active,
                "position": m.position,
                "created_at": m.created_at.ToDatetime().strftime("%Y-%m-%d %H:%M") if m.HasField("created_at") else "",
            }
            for m in body.messages
        ],
        next_cursor=body.next_cursor,
        graph=graph,
        revisions=[
            {
                "number": r.number,
                "kind": r.kind,
                "message_count": r.message_count,
                "created_at": r.created_at.ToDatetime().strftime("%Y-%m-%d %H:%M") if r.HasField("created_at") else "",
                "head": r.number == body.conversation.head_revision,
            }
            for r in revisions.revisions
        ],
        older_revisions=revisions.next_cursor,
        revisions_cursor=revisions_cursor,
        confirm_error=False,
        notice=notice,
        tag_error=tag_error,
        max_tags=MAX_TAGS,
    )


@router.post(PREFIX + "/{vault}/archive/c/{conversation_id}/tags", response_model=None)
async def set_tags(vault: str, conversation_id: str, request: Request, gw: GatewayDep) -> Response:
    """The conversation's tags replaced by the form's, if they are still at the version the page showed;
    a stale edit saves nothing and shows the current tags (the vault checks the version)."""
    person = await owner(request, gw, vault)
    form = await person.form()
    text = str(form.get("tags") or "")
    expected = form_number(form, "tags_version")
    try:
        tags = parse_tags(text)
        await _call(
            person,
            "SetTags",
            pb.SetTagsRequest(vault=vault, conversation_id=conversation_id, tags=tags, expected_tags_version=expected),
        )
    except Conflict:
        message = person.gettext(STALE_TAGS) % {"yours": ", ".join(parse_tags(text, check=False)) or "-"}
        return await _conversation_page(person, conversation_id, status=409, tag_error=message)
    except (InvalidArgument, LimitExceeded) as error:
        return await _conversation_page(person, conversation_id, status=400, tag_error=error.message)
    return redirect(f"{person.url('archive')}/c/{quote(conversation_id, safe='')}?tags_saved=1")


def parse_tags(text: str, *, check: bool = True) -> list[str]:
    """Tags as typed (separated by commas or spaces): lowercased, without repeats, in the order given;
    more than MAX_TAGS refused here with what to change (the vault checks every tag's form)."""
    tags: list[str] = []
    for word in text.replace(",", " ").split():
        tag = word.strip().lower()
        if tag not in tags:
            tags.append(tag)
    if check and len(tags) > MAX_TAGS:
        raise InvalidArgument(
            f"at most {MAX_TAGS} tags per conversation; {len(tags)} given: remove {len(tags) - MAX_TAGS}",
            field="tags",
        )
    return tags


@router.post(PREFIX + "/{vault}/archive/c/{conversation_id}/delete", response_model=None)
async def delete(vault: str, conversation_id: str, request: Request, gw: GatewayDep) -> RedirectResponse:
    """Deleted only when the form repeats the conversation's id exactly (the vault checks it too)."""
    person = await owner(request, gw, vault)
    form = await person.form()
    confirm = str(form.get("confirm") or "").strip()
    if confirm != conversation_id:
        raise InvalidArgument(
            "type the conversation's id exactly to confirm deleting it; nothing was deleted", field="confirm"
        )
    response = await _call(
        person,
        "DeleteConversation",
        pb.DeleteConversationRequest(vault=vault, conversation_id=conversation_id, confirm=confirm),
    )
    return redirect(
        f"{person.url('archive')}?deleted_revisions={response.revisions_deleted}"
        f"&deleted_messages={response.messages_deleted}"
    )
