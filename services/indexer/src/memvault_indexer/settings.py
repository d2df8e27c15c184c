"""Indexer settings (`MEMVAULT_*` environment variables)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from memvault_core.metrics import MetricsSettings
from memvault_core.settings import IdentitySettings, LogSettings, NatsSettings, ServiceSettings
from memvault_indexer.embedder import EmbedderSettings
from memvault_indexer.store import VectorStoreSettings


class IndexerGroup(BaseModel):
    listen: str = "127.0.0.1:50052"
    """host:port for gRPC (IndexService); 0.0.0.0:50052 in a container."""
    address: str = ""
    """Where `reindex` and `reconcile` reach the running indexer; empty: the listen address on this host."""
    vault_address: str = "127.0.0.1:50051"
    """The vault, where memory text is read and index state reported."""
    batch_size: int = Field(default=256, ge=1, le=1000)
    """Memories and messages indexed together, at most (a `memories.created` event naming more is never cut);
    a fetch asks for about that many memories' worth of events. Fewer, larger batches cost fewer round trips
    to the vault per memory, which an import's last memories wait for."""
    max_attempts: int = Field(default=5, ge=1, le=100)
    """Deliveries of one event before it goes to the dead-letter stream."""
    call_timeout_seconds: float = Field(default=10.0, gt=0)
    shutdown_grace_seconds: float = 10.0


class Settings(ServiceSettings):
    indexer: IndexerGroup = IndexerGroup()
    embedder: EmbedderSettings = EmbedderSettings()
    qdrant: VectorStoreSettings = VectorStoreSettings()
    nats: NatsSettings = NatsSettings()
    identity: IdentitySettings
    log: LogSettings = LogSettings()
    metrics: MetricsSettings = MetricsSettings()
