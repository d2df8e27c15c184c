"""memvault indexer service."""
