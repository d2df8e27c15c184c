"""The review queue: each proposal beside what it may duplicate, contradict or replace; decide one or many."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memvault_core import limits
from memvault_core.errors import InvalidArgument, MemvaultError
from memvault_gateway.api import memories as api_memories
from memvault_gateway.api import shapes as api_shapes
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

DECISIONS = {"approve", "replace", "reject"}
DONE = {
    "approve": N_("Approved: %(count)d."),
    "replace": N_("Approved, replacing what they are similar to: %(count)d."),
    "reject": N_("Rejected: %(count)d."),
}
PAGE_SIZE = 25


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
    return person.render(
        "review.html",
        "review",
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
