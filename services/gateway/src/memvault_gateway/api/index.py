"""/api/v1 index maintenance: a vault's failed index jobs and their retry, and the indexer's rebuild /
re-embed job with its progress.

Failed index jobs are a vault's own: its owners with the admin scope (the owner's session, or a
service token with `admin`) list and retry them. A rebuild or re-embed works on the whole index of
the installation, so only an administrator's browser session may start one or see its progress;
the vault still checks that the administrator owns the vault in the path, as for every call.
"""

from __future__ import annotations

from typing import Any, Literal

import grpc
from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from memvault.index.v1 import index_pb2
from memvault.vault.v1 import index_admin_pb2 as pb
from memvault.vault.v1 import index_admin_pb2_grpc
from memvault_core import wire
from memvault_core.errors import PermissionDenied
from memvault_core.grpc import error_from_rpc
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity
from memvault_gateway.api.access import Caller, GatewayDep, SessionDep, Vault
from memvault_gateway.context import Gateway
from memvault_gateway.store import Session

router = APIRouter(prefix="/api/v1")

JobKind = Literal["rebuild", "reembed"]
_KINDS = {"rebuild": index_pb2.INDEX_JOB_KIND_REBUILD, "reembed": index_pb2.INDEX_JOB_KIND_REEMBED}
MAX_FAILURES = 200


def _stub(gw: Gateway) -> index_admin_pb2_grpc.IndexAdminServiceStub:
    return index_admin_pb2_grpc.IndexAdminServiceStub(gw.vault.channel)


def _metadata(gw: Gateway, identity: Identity) -> tuple[tuple[str, str], ...]:
    return ((GRPC_METADATA_KEY, gw.signer.sign(identity)),)


def administrator(session: Session) -> Identity:
    """The identity of an administrator's session; anyone else is refused."""
    if not session.user.is_admin:
        raise PermissionDenied(
            "only an administrator can rebuild or re-embed the index (it is the whole installation's)"
        )
    return Identity(subject=session.user.subject, client="", scopes=frozenset(SCOPES), vaults=())


def job_json(job: index_pb2.IndexJob) -> dict[str, Any]:
    return {
        "kind": index_pb2.IndexJobKind.Name(job.kind).removeprefix("INDEX_JOB_KIND_").lower(),
        "state": index_pb2.IndexJobState.Name(job.state).removeprefix("INDEX_JOB_STATE_").lower(),
        "done": job.done,
        "total": job.total,
        "failed": job.failed,
        "started_at": wire.iso_for_api(job, "started_at"),
        "finished_at": wire.iso_for_api(job, "finished_at"),
        "error": job.error or None,
        "model": job.model,
    }


# The calls behind the routes, shared with the dashboard's Index page; each acts as `identity`.


async def failures(gw: Gateway, identity: Identity, vault: str, limit: int = 50) -> dict[str, Any]:
    try:
        reply = await _stub(gw).ListIndexFailures(
            pb.ListIndexFailuresRequest(vault=vault, limit=limit), metadata=_metadata(gw, identity)
        )
    except grpc.aio.AioRpcError as error:
        raise error_from_rpc(error) from None
    return {
        "failed_total": reply.total,
        "failures": [
            {
                "memory_id": f.memory_id,
                "error": f.error,
                "attempts": f.attempts,
                "failed_at": wire.iso_for_api(f, "failed_at"),
            }
            for f in reply.failures
        ],
    }


async def retry(gw: Gateway, identity: Identity, vault: str, memory_ids: list[str]) -> int:
    try:
        reply = await _stub(gw).RetryIndexFailures(
            pb.RetryIndexFailuresRequest(vault=vault, memory_ids=memory_ids), metadata=_metadata(gw, identity)
        )
    except grpc.aio.AioRpcError as error:
        raise error_from_rpc(error) from None
    return int(reply.retried)


async def start_job(gw: Gateway, identity: Identity, vault: str, kind: JobKind) -> dict[str, Any]:
    try:
        reply = await _stub(gw).StartIndexJob(
            pb.StartIndexJobRequest(vault=vault, kind=_KINDS[kind]), metadata=_metadata(gw, identity)
        )
    except grpc.aio.AioRpcError as error:
        raise error_from_rpc(error) from None
    return job_json(reply.job)


async def current_job(gw: Gateway, identity: Identity, vault: str) -> dict[str, Any] | None:
    try:
        reply = await _stub(gw).GetIndexJob(pb.GetIndexJobRequest(vault=vault), metadata=_metadata(gw, identity))
    except grpc.aio.AioRpcError as error:
        raise error_from_rpc(error) from None
    return job_json(reply.job) if reply.HasField("job") else None


@router.get("/vaults/{vault}/index")
async def index_failures(
    vault: Vault, caller: Caller, gw: GatewayDep, limit: int = Query(50, ge=1, le=MAX_FAILURES)
) -> dict[str, Any]:
    """The vault's failed index jobs (memories the indexer could not embed), newest first, with their error."""
    return await failures(gw, caller.identity(), vault, limit)


class RetryRequest(BaseModel):
    memory_ids: list[str] = Field(default_factory=list, max_length=1000)
    """The failed memories to retry; empty retries all of the vault's."""


@router.post("/vaults/{vault}/index/retry")
async def index_retry(vault: Vault, caller: Caller, gw: GatewayDep, body: RetryRequest) -> dict[str, Any]:
    """Send failed memories of the vault to the indexer again (some, or all); they are pending again."""
    return {"retried": await retry(gw, caller.identity(), vault, body.memory_ids)}


class JobRequest(BaseModel):
    kind: JobKind
    """`rebuild`: drop the index and embed every memory again (recall is keyword-only until it is full);
    `reembed`: embed what is missing or another model's (after a model change)."""


@router.get("/vaults/{vault}/index/job")
async def index_job(vault: Vault, session: SessionDep, gw: GatewayDep) -> dict[str, Any]:
    """The indexer's running or last rebuild / re-embed job (administrators)."""
    return {"job": await current_job(gw, administrator(session), vault)}


@router.post("/vaults/{vault}/index/job", status_code=202)
async def index_job_start(vault: Vault, session: SessionDep, gw: GatewayDep, body: JobRequest) -> dict[str, Any]:
    """Start a rebuild or re-embed of the whole index in the background (administrators; one at a time)."""
    return {"job": await start_job(gw, administrator(session), vault, body.kind)}
