"""memvault gateway service."""
