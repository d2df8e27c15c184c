"""Memories: hybrid search (as agents recall) or a filtered list, a page per memory, edit in place, replace,
invalidate and forget."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from memvault_core import limits
from memvault_core.errors import InvalidArgument
from memvault_gateway.api import memories as api_memories
from memvault_gateway.api import shapes as api_shapes
from memvault_gateway.api import sources as api_sources
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, form_number, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

PAGE_SIZE = 25
STATUSES = list(api_shapes.StatusName.__args__)  # type: ignore[attr-defined]
TYPES = list(api_shapes.MemoryType.__args__)  # type: ignore[attr-defined]
DONE = {
    "invalidated": N_("The memory is invalidated."),
    "reviewed": N_("Marked as reviewed."),
    "edited": N_("Saved in place: the same memory, with the previous version in its history."),
    "unchanged": N_("Nothing changed."),
    "replaced": N_("This memory replaces the previous one, which is kept as superseded."),
    "proposed": N_("The replacement waits in the review queue; this memory stays until it is approved."),
}
FORGOTTEN = N_("The memory is forgotten; its text will be refused from now on.")
LIFTED = N_("The exclusion is lifted: the text can be stored again.")
EXCLUSIONS_PAGE = 50


def _chosen(values: list[str], known: list[str], field: str) -> list[Any]:
    chosen = [v for v in values if v]
    unknown = [v for v in chosen if v not in known]
    if unknown:
        raise InvalidArgument(f"{field} must be one of: {', '.join(known)}", field=field)
    return chosen


def _day(value: str, field: str) -> date | None:
    """A date field of the filter form (YYYY-MM-DD, as a date input sends it); empty: none."""
    if not value.strip():
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise InvalidArgument(f"{field} must be a date such as 2026-12-31", field=field) from None


@router.get(PREFIX + "/{vault}/memories")
async def memories(
    vault: str,
    request: Request,
    gw: GatewayDep,
    q: Annotated[str, Query(max_length=limits.MAX_QUERY_CHARS)] = "",
    status: Annotated[list[str], Query(max_length=20)] = [],  # noqa: B006 (FastAPI reads it, never mutates it)
    type: Annotated[list[str], Query(max_length=20)] = [],  # noqa: B006
    tag: Annotated[str, Query(max_length=limits.MAX_TAG_CHARS)] = "",
    cursor: Annotated[str, Query(max_length=2000)] = "",
    forgotten: bool = False,
    key: Annotated[str, Query(max_length=limits.MAX_KEY_CHARS)] = "",
    scope: Annotated[str, Query(max_length=limits.MAX_KEY_CHARS)] = "",
    source: Annotated[str, Query(max_length=limits.MAX_SOURCE_CHARS)] = "",
    client: Annotated[str, Query(max_length=api_memories.MAX_CLIENT_CHARS)] = "",
    created_from: Annotated[str, Query(max_length=10)] = "",
    created_to: Annotated[str, Query(max_length=10)] = "",
) -> HTMLResponse:
    """With words to look for: the same hybrid recall agents use (mode shown); without: newest first.
    The filters are /api/v1's (`api.memories.memory_filter`); the dates are days, both included."""
    person = await owner(request, gw, vault)
    # The form's "any" sends an empty value; anything else must be a status or type the API knows.
    statuses = _chosen(status, STATUSES, "status")
    types = _chosen(type, TYPES, "type")
    tags = [tag.strip()] if tag.strip() else []
    first_day, last_day = _day(created_from, "created_from"), _day(created_to, "created_to")
    filters = api_memories.memory_filter(
        key=key,
        scope=scope,
        source=source,
        client=client,
        created_from=datetime.combine(first_day, time(), UTC) if first_day else None,
        created_to=datetime.combine(last_day + timedelta(days=1), time(), UTC) if last_day else None,
    )
    narrow = {"key": key, "scope": scope, "source": source, "client": client}
    narrow |= {"created_from": created_from, "created_to": created_to}
    mode, warnings, scores = "", [], True
    if q.strip():
        found = await api_memories.recall(
            vault,
            person.caller,
            gw,
            q=q.strip(),
            limit=limits.MAX_RECALL_RESULTS,
            cursor=cursor,
            status=statuses,
            type=types,
            tag=tags,
            as_of=None,
            include_expired=True,
            filters=filters,
        )
        rows: list[dict[str, Any]] = found["results"]
        mode, warnings, next_cursor = found["mode"], found["warnings"], found["next_cursor"]
    else:
        listed = await api_memories.list_memories(
            vault,
            person.caller,
            gw,
            status=statuses,
            type=types,
            tag=tags,
            limit=PAGE_SIZE,
            cursor=cursor,
            filters=filters,
        )
        rows, next_cursor, scores = listed["memories"], listed["next_cursor"], False
    return person.render(
        "memories.html",
        "memories",
        rows=rows,
        q=q,
        mode=mode,
        warnings=warnings,
        scores=scores,
        chosen_status=statuses,
        chosen_type=types,
        tag=tag,
        narrow=narrow,
        statuses=STATUSES,
        types=TYPES,
        next_cursor=next_cursor,
        notice=person.gettext(FORGOTTEN) if forgotten else "",
    )


@router.get(PREFIX + "/{vault}/exclusions")
async def exclusions(
    vault: str,
    request: Request,
    gw: GatewayDep,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    lifted: bool = False,
) -> HTMLResponse:
    """Texts refused because they were forgotten or rejected: only their hashes remain; each can be lifted."""
    person = await owner(request, gw, vault)
    answer = await api_memories.exclusions(vault, person.caller, gw, limit=EXCLUSIONS_PAGE, offset=offset)
    return person.render(
        "exclusions.html",
        "memories",
        exclusions=answer["exclusions"],
        total=answer["total"],
        offset=offset,
        page_size=EXCLUSIONS_PAGE,
        notice=person.gettext(LIFTED) if lifted else "",
    )


@router.post(PREFIX + "/{vault}/exclusions/lift")
async def lift_exclusion(vault: str, request: Request, gw: GatewayDep) -> Response:
    """Lift one exclusion, by its hash (a row's button) or by the text the owner pastes."""
    person = await owner(request, gw, vault)
    form = await person.form()
    text = str(form.get("text") or "").replace("\r\n", "\n")
    if text.strip():
        await api_memories.lift_exclusion_of_text(vault, api_shapes.LiftIn(text=text), person.caller, gw)
    else:
        await api_memories.lift_exclusion(vault, str(form.get("content_hash") or ""), person.caller, gw)
    return redirect(f"{person.url('exclusions')}?lifted=true")


@router.get(PREFIX + "/{vault}/memories/{memory_id}")
async def memory(
    vault: str,
    memory_id: str,
    request: Request,
    gw: GatewayDep,
    done: str = "",
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    explained = await api_memories.explain(vault, memory_id[:100], person.caller, gw)
    tracked = await api_sources.memory_sources(vault, explained["memory"]["id"], person.caller, gw)
    return person.render(
        "memory.html",
        "memories",
        m=explained["memory"],
        sources=tracked["sources"],
        state=explained["state"],
        history=explained["history"],
        related=explained["related"],
        missing=explained["missing"],
        notice=person.gettext(DONE[done]) if done in DONE else "",
    )


@router.post(PREFIX + "/{vault}/memories/{memory_id}/invalidate")
async def invalidate(vault: str, memory_id: str, request: Request, gw: GatewayDep) -> Response:
    person = await owner(request, gw, vault)
    form = await person.form()
    body = api_shapes.ReasonIn(reason=str(form.get("reason") or ""), expected_version=form_number(form, "version"))
    await api_memories.invalidate(vault, memory_id[:100], body, person.caller, gw)
    return redirect(f"{person.url('memories')}/{memory_id}?done=invalidated")


@router.post(PREFIX + "/{vault}/memories/{memory_id}/reviewed")
async def reviewed(vault: str, memory_id: str, request: Request, gw: GatewayDep) -> Response:
    person = await owner(request, gw, vault)
    form = await person.form()
    body = api_shapes.VersionIn(expected_version=form_number(form, "version"))
    await api_memories.mark_reviewed(vault, memory_id[:100], body, person.caller, gw)
    return redirect(f"{person.url('memories')}/{memory_id}?done=reviewed")


@router.get(PREFIX + "/{vault}/memories/{memory_id}/forget")
async def confirm_forget(vault: str, memory_id: str, request: Request, gw: GatewayDep) -> HTMLResponse:
    """Forgetting cannot be undone: say what it does and ask once more."""
    person = await owner(request, gw, vault)
    explained = await api_memories.explain(vault, memory_id[:100], person.caller, gw)
    return person.render("forget.html", "memories", m=explained["memory"])


@router.post(PREFIX + "/{vault}/memories/{memory_id}/forget")
async def forget(vault: str, memory_id: str, request: Request, gw: GatewayDep) -> Response:
    person = await owner(request, gw, vault)
    await person.form()
    await api_memories.forget(vault, memory_id[:100], person.caller, gw)
    return redirect(f"{person.url('memories')}?forgotten=true")


def _tags(form: Any) -> list[str]:
    return [t.strip() for t in str(form.get("tags") or "").split(",") if t.strip()]


@router.post(PREFIX + "/{vault}/memories/{memory_id}/edit")
async def edit(vault: str, memory_id: str, request: Request, gw: GatewayDep) -> Response:
    """A typo fix or new tags: the same memory (same id), its previous version kept in the history."""
    person = await owner(request, gw, vault)
    form = await person.form()
    body = api_shapes.EditIn.model_validate(
        {
            "content": str(form.get("content") or "").replace("\r\n", "\n"),
            "tags": _tags(form),
            "expected_version": form_number(form, "version"),
        }
    )
    answer = await api_memories.edit(vault, memory_id[:100], body, person.caller, gw)
    done = "edited" if answer["changed"] else "unchanged"
    return redirect(f"{person.url('memories')}/{memory_id}?done={done}")


@router.post(PREFIX + "/{vault}/memories/{memory_id}/replace")
async def replace(vault: str, memory_id: str, request: Request, gw: GatewayDep) -> Response:
    """A changed fact: a new memory supersedes this one (kept in history), with the text and tags given."""
    person = await owner(request, gw, vault)
    form = await person.form()
    explained = await api_memories.explain(vault, memory_id[:100], person.caller, gw)
    old = explained["memory"]
    tags = _tags(form)
    body = api_shapes.SupersedeIn.model_validate(
        {
            "replacement": {
                "content": str(form.get("content") or "").replace("\r\n", "\n"),
                "type": old["type"],
                "key": old["key"] or "",
                "scope": old["scope"] or "",
                "tags": tags,
                "source": "dashboard",
            },
            "expected_version": form_number(form, "version"),
        }
    )
    answer = await api_memories.supersede(vault, memory_id[:100], body, person.caller, gw)
    if answer["applied"] and answer["id"]:
        return redirect(f"{person.url('memories')}/{answer['id']}?done=replaced")
    return redirect(f"{person.url('memories')}/{memory_id}?done=proposed")
