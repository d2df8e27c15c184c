"""memvault-mcp: the MCP server (Streamable HTTP), reachable only through the gateway."""

from __future__ import annotations

import argparse
import asyncio
import logging

import uvicorn

from memvault_core.identity import IdentitySigner
from memvault_core.logging import setup_logging
from memvault_core.settings import load_settings
from memvault_core.telemetry import setup_telemetry, shutdown_telemetry
from memvault_mcp.app import build_app
from memvault_mcp.settings import Settings
from memvault_mcp.vault_client import VaultClient

log = logging.getLogger("memvault_mcp")


async def serve(settings: Settings) -> None:
    client = VaultClient(settings.mcp.vault_address, settings.mcp.call_timeout_seconds)
    signer = IdentitySigner(settings.identity.secret.get_secret_value(), settings.identity.ttl_seconds)
    config = uvicorn.Config(
        build_app(client, signer),
        host=settings.mcp.host,
        port=settings.mcp.port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=10,
    )
    log.info("serving", extra={"host": settings.mcp.host, "port": settings.mcp.port})
    try:
        await uvicorn.Server(config).serve()
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="memvault-mcp", description=__doc__).parse_args(argv)
    settings = load_settings(Settings)
    setup_logging("mcp", settings.log.level)
    setup_telemetry("mcp")
    try:
        asyncio.run(serve(settings))
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    main()
