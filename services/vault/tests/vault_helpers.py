"""Helpers the vault's tests share."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from memvault.vault.v1 import vault_pb2_grpc
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner

SECRET = "test-secret-" + "x" * 32


@dataclass
class Caller:
    """One account with one vault of its own, and a way to call the vault as it."""

    stub: vault_pb2_grpc.VaultServiceStub
    signer: IdentitySigner
    subject: str
    vault: str

    def metadata(self, **overrides: object) -> tuple[tuple[str, str], ...]:
        identity = Identity(subject=self.subject, scopes=frozenset(SCOPES))
        if overrides:
            identity = Identity(**{**identity.__dict__, **overrides})  # type: ignore[arg-type]
        return ((GRPC_METADATA_KEY, self.signer.sign(identity)),)


def rpc_error_kind(error: grpc.aio.AioRpcError) -> str:
    return dict(error.trailing_metadata() or ()).get("memvault-error-kind", "")
