"""Accounts, their vaults and memberships: who may use which vault, and how."""
