"""The gateway's tests run it in-process against real Postgres, VaultService and mcp (see gateway_fixtures.py)."""

from gateway_fixtures import gateway_dsn, mcp_url, source_root, start_gateway, vault_address, vault_store

__all__ = ["gateway_dsn", "mcp_url", "source_root", "start_gateway", "vault_address", "vault_store"]
