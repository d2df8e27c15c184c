"""memvault-mcp: the MCP server (Streamable HTTP), reachable only through the gateway.

`memvault-mcp stdio --url <gateway>/mcp` runs on the user's machine instead: an MCP server on
stdin/stdout for apps that only speak stdio, forwarding every tool call to the gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

import uvicorn

from memvault_core.identity import IdentitySigner
from memvault_core.logging import setup_logging
from memvault_core.metrics import serve_metrics
from memvault_core.settings import load_settings
from memvault_core.telemetry import setup_telemetry, shutdown_telemetry
from memvault_core.vault_client import VaultClient
from memvault_mcp.app import build_app
from memvault_mcp.settings import Settings

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
    metrics_server = serve_metrics("mcp", settings.metrics)
    try:
        await uvicorn.Server(config).serve()
    finally:
        await client.close()
        if metrics_server is not None:
            metrics_server.stop()


def _stdio(args: argparse.Namespace) -> None:
    from memvault_mcp import bridge  # imported here: the service itself never needs it

    token = None
    if args.token_env:
        token = os.environ.get(args.token_env, "").strip()
        if not token:
            sys.exit(
                f"memvault-mcp stdio: the environment variable {args.token_env} is empty or unset; "
                "set it to a service token (mvs_...) or leave out --token-env to sign in with OAuth"
            )
    setup_logging("mcp-stdio", "WARNING")
    try:
        asyncio.run(bridge.run(args.url, token=token, open_browser=not args.no_browser, login_only=args.login))
    except bridge.BridgeError as error:
        sys.exit(f"memvault-mcp stdio: {error}")
    except KeyboardInterrupt:
        pass


def _url(value: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{value!r} is not an http(s) URL such as https://memvault.example/mcp")
    return value.rstrip("/")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="memvault-mcp", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", metavar="{stdio}")
    stdio = commands.add_parser(
        "stdio",
        help="serve MCP on stdin/stdout, forwarding to a memvault gateway",
        description="An MCP server on stdin/stdout for apps that only speak stdio. Signs in with a service "
        "token, or with OAuth in the browser (tokens kept in a 0600 file under the user's config directory).",
    )
    stdio.add_argument("--url", required=True, type=_url, help="the gateway's MCP address, https://<host>/mcp")
    stdio.add_argument(
        "--token-env",
        metavar="NAME",
        help="read a service token from this environment variable instead of signing in with OAuth",
    )
    stdio.add_argument("--login", action="store_true", help="sign in (if need be), check the connection, and exit")
    stdio.add_argument("--no-browser", action="store_true", help="only print the sign-in address; open no browser")
    args = parser.parse_args(argv)
    if args.command == "stdio":
        _stdio(args)
        return
    settings = load_settings(Settings)
    setup_logging("mcp", settings.log.level)
    setup_telemetry("mcp")
    try:
        asyncio.run(serve(settings))
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    main()
