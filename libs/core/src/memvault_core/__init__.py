"""Shared plumbing for every memvault service."""
