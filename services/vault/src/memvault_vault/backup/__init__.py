"""Backup, restore and readable export of a vault (docs/backup-format.md)."""
