"""memvault vault service."""
