"""Index: the vault's search index (indexed, waiting, failed), its failed index jobs with their error
and a retry (one or all), and for administrators the rebuild / re-embed of the whole index with its
progress. Plain forms and links: a refresh shows how far a job has come."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from memvault.vault.v1 import vault_pb2 as vpb
from memvault_core import vault_client as rpc
from memvault_core.errors import InvalidArgument, PermissionDenied, Unavailable
from memvault_gateway.api import index as api_index
from memvault_gateway.dashboard.common import PREFIX, DashboardRoute, GatewayDep, owner, redirect
from memvault_gateway.dashboard.i18n import N_

router = APIRouter(route_class=DashboardRoute)

RETRIED = N_("%(n)d memories sent to the indexer again.")
STARTED = N_("The job has started; refresh this page to see its progress.")


@router.get(PREFIX + "/{vault}/index")
async def index_page(
    vault: str,
    request: Request,
    gw: GatewayDep,
    retried: Annotated[int, Query(ge=-1)] = -1,
    started: Annotated[int, Query(ge=0, le=1)] = 0,
) -> HTMLResponse:
    person = await owner(request, gw, vault)
    identity = person.caller.identity()
    stats = await gw.vault.call(rpc.VaultClient.get_stats, vpb.GetStatsRequest(vault=vault), identity)
    failures = await api_index.failures(gw, identity, vault) if person.is_owner else None
    admin = person.session.user.is_admin and person.is_owner
    job, job_error = None, ""
    if admin:
        try:
            job = await api_index.current_job(gw, api_index.administrator(person.session), vault)
        except Unavailable as error:
            job_error = error.message
    notice = ""
    if retried >= 0:
        notice = person.gettext(RETRIED) % {"n": retried}
    elif started:
        notice = person.gettext(STARTED)
    return person.render(
        "index.html",
        "index",
        stats={"indexed": stats.indexed, "pending": stats.index_pending, "failed": stats.index_failed},
        failures=failures,
        admin=admin,
        job=job,
        job_error=job_error,
        notice=notice,
    )


@router.post(PREFIX + "/{vault}/index/retry")
async def retry(vault: str, request: Request, gw: GatewayDep) -> RedirectResponse:
    """Retry one failed memory (`memory_id`) or, without one, all of the vault's."""
    person = await owner(request, gw, vault)
    form = await person.form()
    memory_id = str(form.get("memory_id") or "").strip()
    count = await api_index.retry(gw, person.caller.identity(), vault, [memory_id] if memory_id else [])
    return redirect(f"{person.url('index')}?retried={count}")


@router.post(PREFIX + "/{vault}/index/job")
async def start_job(vault: str, request: Request, gw: GatewayDep) -> RedirectResponse:
    person = await owner(request, gw, vault)
    form = await person.form()
    kind = str(form.get("kind") or "")
    if kind not in ("rebuild", "reembed"):
        raise InvalidArgument("kind must be rebuild or reembed", field="kind")
    if not person.session.user.is_admin:
        raise PermissionDenied("only an administrator can rebuild or re-embed the index")
    await api_index.start_job(gw, api_index.administrator(person.session), vault, kind)  # type: ignore[arg-type]
    return redirect(f"{person.url('index')}?started=1")
