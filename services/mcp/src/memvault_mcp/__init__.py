"""memvault mcp service."""
