"""The operating guide agents read first, and the vault's settings (approval mode, retention)."""
