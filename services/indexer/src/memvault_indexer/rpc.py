"""IndexService over gRPC: translate and delegate to the Indexer.

Every call carries a service identity signed with the shared identity key: the vault's for
searches, the indexer's own (its commands) for maintenance; starting and watching a rebuild or
re-embed job also the vault's (it forwards an owner's request, IndexAdminService).
"""

from __future__ import annotations

import grpc

from memvault.index.v1 import index_pb2 as pb
from memvault.index.v1 import index_pb2_grpc
from memvault_core import limits
from memvault_core.errors import InvalidArgument, Unauthenticated, Unavailable
from memvault_core.grpc import identity_token
from memvault_core.identity import IdentitySigner
from memvault_indexer.indexing import Indexer
from memvault_indexer.jobs import JobKind, JobRunner, JobStatus

MAX_VECTORS = 1000
"""Memories per GetVectors or PutVectors call."""
MAX_SCORE_IDS = 500
MAX_PENDING = 600
"""Texts of memories not yet indexed that one call may carry (the vault's duplicate check sends up to 600)."""


REBUILDING = "the vector index is being rebuilt; recall answers keyword-only until it is full"


class IndexServicer(index_pb2_grpc.IndexServiceServicer):
    def __init__(self, indexer: Indexer, backend: str, signer: IdentitySigner, jobs: JobRunner | None = None) -> None:
        self._indexer = indexer
        self._backend = backend
        self._signer = signer
        self.jobs = jobs or JobRunner(indexer)

    def _check(self, context: grpc.aio.ServicerContext, *services: str) -> None:
        self._signer.verify_service(identity_token(context), *services)

    async def Search(self, request: pb.SearchRequest, context: grpc.aio.ServicerContext) -> pb.SearchResponse:
        self._check(context, "vault")
        if self._indexer.filling or self.jobs.filling:
            raise Unavailable(REBUILDING)
        if not request.vault_id:
            raise InvalidArgument("vault_id is required", field="vault_id")
        if not request.query.strip() or len(request.query) > limits.MAX_QUERY_CHARS:
            raise InvalidArgument(f"query must be 1 to {limits.MAX_QUERY_CHARS} characters", field="query")
        if len(request.score_ids) > MAX_SCORE_IDS or len(request.pending) > MAX_PENDING:
            raise InvalidArgument(f"at most {MAX_SCORE_IDS} score_ids and {MAX_PENDING} pending texts")
        cosines = await self._indexer.search(
            request.vault_id,
            request.query,
            max(0, min(request.limit, limits.MAX_RECALL_RESULTS * 4)),
            list(request.score_ids),
            [(p.memory_id, p.text) for p in request.pending],
            messages=request.messages,
        )
        hits = sorted(cosines.items(), key=lambda item: item[1], reverse=True)
        return pb.SearchResponse(
            hits=[pb.ScoredMemory(memory_id=i, cosine=c) for i, c in hits], model=self._indexer.model
        )

    async def Similar(self, request: pb.SimilarRequest, context: grpc.aio.ServicerContext) -> pb.SimilarResponse:
        self._check(context, "vault")
        if not request.vault_id:
            raise InvalidArgument("vault_id is required", field="vault_id")
        if len(request.texts) > limits.MAX_BULK_ITEMS or len(request.pending) > MAX_PENDING:
            raise InvalidArgument(f"at most {limits.MAX_BULK_ITEMS} texts and {MAX_PENDING} pending texts")
        if request.embed_only:
            await self._indexer.embed(list(request.texts))
            return pb.SimilarResponse(results=[pb.SimilarMatches() for _ in request.texts], model=self._indexer.model)
        results = await self._indexer.similar(
            request.vault_id,
            list(request.texts),
            max(1, min(request.limit or 5, 50)),
            request.min_cosine,
            [(p.memory_id, p.text) for p in request.pending],
        )
        return pb.SimilarResponse(
            results=[
                pb.SimilarMatches(
                    memories=[pb.ScoredMemory(memory_id=i, cosine=c) for i, c in memories],
                    earlier=[pb.EarlierText(index=i, cosine=c) for i, c in earlier],
                )
                for memories, earlier in results
            ],
            model=self._indexer.model,
        )

    async def GetIndexInfo(
        self, request: pb.GetIndexInfoRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetIndexInfoResponse:
        self._check(context, "vault", "indexer")
        filling = self._indexer.filling or self.jobs.filling
        return pb.GetIndexInfoResponse(
            model=self._indexer.model,
            dimension=self._indexer.embedder.dimension,
            collection=self._indexer.store.collection,
            points=0 if request.skip_points else await self._indexer.store.count(),
            backend=self._backend,
            searchable=not filling,
            not_searchable_reason=REBUILDING if filling else "",
        )

    async def Reindex(self, request: pb.ReindexRequest, context: grpc.aio.ServicerContext) -> pb.ReindexResponse:
        self._check(context, "indexer")
        return pb.ReindexResponse(indexed=await self._indexer.reindex())

    async def Reconcile(self, request: pb.ReconcileRequest, context: grpc.aio.ServicerContext) -> pb.ReconcileResponse:
        self._check(context, "indexer")
        report = await self._indexer.reconcile(repair=request.repair)
        return pb.ReconcileResponse(
            missing=len(report.missing), stale=len(report.stale), orphans=len(report.orphans), repaired=report.repaired
        )

    async def GetVectors(
        self, request: pb.GetVectorsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetVectorsResponse:
        self._check(context, "vault")
        if not request.vault_id:
            raise InvalidArgument("vault_id is required", field="vault_id")
        if len(request.memory_ids) > MAX_VECTORS:
            raise InvalidArgument(f"at most {MAX_VECTORS} memory_ids per call", field="memory_ids")
        points = await self._indexer.store.vectors(list(request.memory_ids))
        return pb.GetVectorsResponse(
            model=self._indexer.model,
            dimension=self._indexer.embedder.dimension,
            vectors=[
                pb.StoredVector(memory_id=p.memory_id, content_hash=p.content_hash, vector=p.vector)
                for p in points
                # another vault's point (a wrong id) or one left from another model is not this vault's vector
                if p.vault_id == request.vault_id and p.model == self._indexer.model
            ],
        )

    async def PutVectors(
        self, request: pb.PutVectorsRequest, context: grpc.aio.ServicerContext
    ) -> pb.PutVectorsResponse:
        self._check(context, "vault")
        if not request.vault_id:
            raise InvalidArgument("vault_id is required", field="vault_id")
        if len(request.vectors) > MAX_VECTORS:
            raise InvalidArgument(f"at most {MAX_VECTORS} vectors per call", field="vectors")
        if request.model != self._indexer.model:
            raise InvalidArgument(
                f"vectors made by {request.model!r}; this indexer embeds with {self._indexer.model!r}", field="model"
            )
        dimension = self._indexer.embedder.dimension
        if any(len(v.vector) != dimension for v in request.vectors):
            raise InvalidArgument(f"every vector must have {dimension} dimensions", field="vectors")
        await self._indexer.put_vectors(
            request.vault_id, [(v.memory_id, v.content_hash, list(v.vector)) for v in request.vectors]
        )
        return pb.PutVectorsResponse(stored=len(request.vectors))

    # ------------------------------------------------------------------ maintenance (indexer, or the vault for owners)

    async def StartIndexJob(
        self, request: pb.StartIndexJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.StartIndexJobResponse:
        token = identity_token(context)
        try:
            self._signer.verify_service(token, "indexer")
            caller = "indexer"
        except Unauthenticated:
            self._signer.verify_service(token, "vault")
            caller = "vault"
        if request.kind not in _KINDS:
            raise InvalidArgument("kind must be REBUILD or REEMBED", field="kind")
        return pb.StartIndexJobResponse(job=_job(self.jobs.start(_KINDS[request.kind], caller)))

    async def GetIndexJob(
        self, request: pb.GetIndexJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetIndexJobResponse:
        self._check(context, "indexer", "vault")
        status = self.jobs.status
        return pb.GetIndexJobResponse(job=_job(status)) if status else pb.GetIndexJobResponse()

    async def ListCollections(
        self, request: pb.ListCollectionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListCollectionsResponse:
        self._check(context, "indexer", "vault")
        active = self._indexer.store.collection
        names = sorted({*await self._indexer.store.collections(), active})
        return pb.ListCollectionsResponse(collections=[pb.Collection(name=n, active=n == active) for n in names])

    async def DropCollection(
        self, request: pb.DropCollectionRequest, context: grpc.aio.ServicerContext
    ) -> pb.DropCollectionResponse:
        self._check(context, "indexer")
        await self._indexer.store.drop_other_collection(request.name)
        return pb.DropCollectionResponse()


_KINDS: dict[pb.IndexJobKind.ValueType, JobKind] = {
    pb.INDEX_JOB_KIND_REBUILD: "rebuild",
    pb.INDEX_JOB_KIND_REEMBED: "reembed",
}
_STATES = {
    "running": pb.INDEX_JOB_STATE_RUNNING,
    "finished": pb.INDEX_JOB_STATE_FINISHED,
    "failed": pb.INDEX_JOB_STATE_FAILED,
}


def _job(status: JobStatus) -> pb.IndexJob:
    job = pb.IndexJob(
        kind=next(k for k, v in _KINDS.items() if v == status.kind),
        state=_STATES[status.state],
        done=status.done,
        total=status.total,
        failed=status.failed,
        error=status.error,
        started_by=status.started_by,
        model=status.model,
    )
    job.started_at.FromDatetime(status.started_at)
    if status.finished_at is not None:
        job.finished_at.FromDatetime(status.finished_at)
    return job
