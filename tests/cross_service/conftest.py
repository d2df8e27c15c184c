"""Tests across services with the gateway in-process against real Postgres, a real VaultService and the
real mcp service (the fixtures of services/gateway/tests/gateway_fixtures.py)."""

from gateway_fixtures import gateway_dsn, mcp_url, source_root, start_gateway, vault_address, vault_store

__all__ = ["gateway_dsn", "mcp_url", "source_root", "start_gateway", "vault_address", "vault_store"]
