"""What one ListVaults round trip costs, as the gateway made it before every /api/v1 vault route.

    python -m tests.bench.round_trip --calls 300

Starts the vault alone (embedded or `MEMVAULT_TEST_*` servers), then calls ListVaults over gRPC with
a signed identity, as the gateway's `vaults_as` does: latency p50/p95 and CPU milliseconds per call
of the vault, its database's Postgres backends and this client. The gateway now keeps a caller's
vault names for 30 s (`api/access.py`), so most calls skip this round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import time
from pathlib import Path

from memvault.vault.v1 import vault_pb2 as vpb
from memvault.vault.v1 import vault_pb2_grpc
from memvault_core.grpc import client_channel
from memvault_core.identity import GRPC_METADATA_KEY, SCOPES, Identity, IdentitySigner
from memvault_devstack.postgres import create_database, drop_database
from memvault_devstack.stack import Stack
from tests.bench import report
from tests.bench.ab import StackMeter

ROOT = Path(__file__).resolve().parents[2]


async def main_async(calls: int) -> None:
    server = os.environ.get("MEMVAULT_TEST_POSTGRES_DSN")
    database = f"memvault_rt_{secrets.token_hex(3)}"
    dsn = create_database(server, database, exist_ok=False) if server else None
    stack = Stack(
        ROOT / "build" / "bench" / f"rt-{secrets.token_hex(3)}",
        postgres_dsn=dsn,
        nats_url=os.environ.get("MEMVAULT_TEST_NATS_URL"),
        services=("vault",),
        log_level="WARNING",
    )
    try:
        await asyncio.to_thread(stack.start)
        signer = IdentitySigner(stack.identity_secret)
        channel = client_channel(stack.vault_address)
        stub = vault_pb2_grpc.VaultServiceStub(channel)
        identity = Identity(subject="owner", scopes=frozenset(SCOPES))
        for _ in range(20):  # warm up
            await stub.ListVaults(vpb.ListVaultsRequest(), metadata=((GRPC_METADATA_KEY, signer.sign(identity)),))
        meter = StackMeter(stack, database)
        samples: list[float] = []
        meter.start()
        for _ in range(calls):
            began = time.perf_counter()
            await stub.ListVaults(
                vpb.ListVaultsRequest(), metadata=((GRPC_METADATA_KEY, signer.sign(identity)),), timeout=10
            )
            samples.append(time.perf_counter() - began)
        meter.stop()
        await channel.close()
    finally:
        await asyncio.to_thread(stack.stop)
        if server:
            drop_database(server, database)
        shutil.rmtree(stack.data_dir, ignore_errors=True)
    print(report.LATENCY_HEADER)
    print(report.latency_row("ListVaults over gRPC, as the gateway's check made it", samples))
    print()
    print(report.cpu_header("CPU ms per call"))
    print(report.cpu_row("ListVaults", meter.used, calls))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.round_trip", description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    asyncio.run(main_async(parser.parse_args().calls))


if __name__ == "__main__":
    main()
