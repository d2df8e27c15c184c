"""The audit log: who did what to a vault or an account, kept for the owner."""
