"""The review queue: each proposal beside what it may duplicate, contradict or replace; decide one or many.
Below them, pending changes of tracked sources (accept, typing the statement for a text source, or
dismiss; old and new JSON values and hashes are shown, never the source's text) and memories flagged
for review because something they depend on changed (mark reviewed)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memvault_core import limits
from memvault_core.errors import InvalidArgument, MemvaultError
from memvault_gateway.api import memories as api_memories
from memvault_gateway.api import shapes as api_shapes
from memvault_gateway.api import sources as api_sources
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

DECISIONS = {"approve", "replace", "reject"}
DONE = {
    "approve": N_("Approved: %(count)d."),
    "replace": N_("Approved, replacing what they are similar to: %(count)d."),
    "reject": N_("Rejected: %(count)d."),
    "source_accepted": N_("The source change was accepted: the memory is superseded."),
    "source_proposed": N_("The source change was accepted: its replacement waits in the queue above."),
    "source_dismissed": N_("The source change was dismissed: the memory stays as it is."),
    "flag_cleared": N_("Marked as reviewed: the memory still holds."),
}
PAGE_SIZE = 25
SOURCE_DECISIONS = {"accept", "dismiss"}


def _shown_value(value: Any) -> str:
    """An extracted JSON value as JSON text (the page escapes it)."""
    return json.dumps(value, ensure_ascii=False)


async def _source_changes(person: Owner, vault: str) -> tuple[list[dict[str, Any]], int]:
    """The newest PAGE_SIZE pending source changes, each with the memory it would replace (its text is memory
    text, not the source's), and how many are pending in all (up to the vault's listing limit)."""
    answer = await api_sources.list_changes(vault, person.caller, person.gw)
    shown = []
    for change in answer["changes"][:PAGE_SIZE]:
        try:
            memory = (await api_memories.explain(vault, change["memory_id"], person.caller, person.gw))["memory"]
        except MemvaultError:
            memory = None
        shown.append(
            {
                **change,
                "memory": memory,
                "old_shown": None if change["old_value"] is None else _shown_value(change["old_value"]),
                "new_shown": None if change["needs_statement"] else _shown_value(change["new_value"]),
            }
        )
    return shown, len(answer["changes"])


def _differences(proposal: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """The fields in which a related memory differs from the proposal (its text is shown beside it anyway)."""
    fields = ("type", "key", "scope", "tags", "status", "source", "valid_from", "valid_to")
    return [name for name in fields if proposal.get(name) != other.get(name)]


@router.get(PREFIX + "/{vault}/review")
async def queue(
    vault: str,
    request: Request,
    gw: GatewayDep,
    cursor: str = "",
    done: str = "",
    count: int = 0,
    failed: int = 0,
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    answer = await api_memories.review_queue(vault, person.caller, gw, limit=PAGE_SIZE, cursor=cursor[:2000])
    items = [
        {
            "memory": item["memory"],
            "related": [
                {"relation": relation, "memory": other, "differences": _differences(item["memory"], other)}
                for relation, others in item["related"].items()
                for other in others
            ],
        }
        for item in answer["items"]
    ]
    notice = person.gettext(DONE[done]) % {"count": max(0, count)} if done in DONE else ""
    flagged = await api_memories.memory_audit(vault, person.caller, gw, kind=["flagged"], limit=PAGE_SIZE)
    source_changes, changes_total = await _source_changes(person, vault)
    return person.render(
        "review.html",
        "review",
        source_changes=source_changes,
        changes_total=changes_total,
        flagged=[finding["memory"] for finding in flagged["findings"]],
        flagged_total=max(flagged["counts"].get("flagged", 0), len(flagged["findings"])),
        items=items,
        total=answer["total"],
        next_cursor=answer["next_cursor"],
        notice=notice,
        failed=max(0, failed),
    )


@router.post(PREFIX + "/{vault}/review")
async def decide(vault: str, request: Request, gw: GatewayDep) -> Response:
    """Approve, approve and replace, or reject the ticked proposals (or the one whose button was pressed)."""
    person = await owner(request, gw, vault)
    form = await person.form()
    # One proposal's own button says "decision:id"; the buttons above the list act on the ticked ones.
    one_decision, _, one = str(form.get("decide_one") or "").partition(":")
    decision = one_decision if one else str(form.get("decision") or "")
    chosen = [one] if one else [str(v) for v in form.getlist("selected")]
    if decision not in DECISIONS:
        raise InvalidArgument("choose Approve, Approve & replace or Reject", field="decision")
    if not chosen:
        raise InvalidArgument("tick at least one proposal first", field="selected")
    if len(chosen) > limits.MAX_LIST_RESULTS:
        raise InvalidArgument(f"at most {limits.MAX_LIST_RESULTS} proposals at once", field="selected")
    done, errors = 0, []
    for memory_id in chosen:
        try:
            if decision == "reject":
                reason = api_shapes.ReasonIn(reason=str(form.get("reason") or "rejected in the dashboard"))
                await api_memories.reject(vault, memory_id, reason, person.caller, gw)
            else:
                body = api_shapes.ApproveIn(replace_similar=decision == "replace")
                await api_memories.approve(vault, memory_id, body, person.caller, gw)
            done += 1
        except MemvaultError as error:
            if error.kind == "permission_denied":
                raise  # a viewer: the whole request is refused, nothing half done
            errors.append(error)
    return redirect(f"{person.url('review')}?done={decision}&count={done}&failed={len(errors)}")


@router.post(PREFIX + "/{vault}/review/source-changes/{change_id}")
async def resolve_source_change(vault: str, change_id: str, request: Request, gw: GatewayDep) -> Response:
    """Accept a pending source change (a text change needs the statement the owner read in the source) or
    dismiss it; the vault refuses a viewer and a text change accepted without a statement."""
    person = await owner(request, gw, vault)
    form = await person.form()
    decision = str(form.get("decision") or "")
    if decision not in SOURCE_DECISIONS:
        raise InvalidArgument("choose Accept or Dismiss", field="decision")
    body = api_sources.ResolveIn(accept=decision == "accept", statement=str(form.get("statement") or ""))
    result = await api_sources.resolve_change(vault, change_id[:100], body, person.caller, gw)
    done = "source_dismissed" if decision == "dismiss" else f"source_{result['outcome']}"
    return redirect(f"{person.url('review')}?done={done if done in DONE else 'source_accepted'}")


@router.post(PREFIX + "/{vault}/review/flagged/{memory_id}")
async def clear_flag(vault: str, memory_id: str, request: Request, gw: GatewayDep) -> Response:
    """The owner checked a flagged memory and it still holds: its flag is cleared."""
    person = await owner(request, gw, vault)
    form = await person.form()
    body = api_shapes.VersionIn(expected_version=form_number(form, "version"))
    await api_memories.mark_reviewed(vault, memory_id[:100], body, person.caller, gw)
    return redirect(f"{person.url('review')}?done=flag_cleared")
