"""memvault-gateway: the only public service (health, /connect, /mcp)."""

from __future__ import annotations

import argparse
import asyncio
import logging

import uvicorn

from memvault_core.identity import IdentitySigner
from memvault_core.logging import setup_logging
from memvault_core.settings import load_settings
from memvault_core.telemetry import setup_telemetry, shutdown_telemetry
from memvault_gateway.app import create_app
from memvault_gateway.settings import Settings

log = logging.getLogger("memvault_gateway")


async def serve(settings: Settings) -> None:
    signer = IdentitySigner(settings.identity.secret.get_secret_value(), settings.identity.ttl_seconds)
    config = uvicorn.Config(
        create_app(settings.gateway, signer),
        host=settings.gateway.host,
        port=settings.gateway.port,
        log_config=None,
        access_log=False,
        proxy_headers=False,
        timeout_graceful_shutdown=10,
    )
    log.info("serving", extra={"public_url": settings.gateway.public_url, "dev_mode": settings.gateway.dev_mode})
    await uvicorn.Server(config).serve()


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="memvault-gateway", description=__doc__).parse_args(argv)
    settings = load_settings(Settings)
    setup_logging("gateway", settings.log.level)
    setup_telemetry("gateway")
    try:
        asyncio.run(serve(settings))
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    main()
