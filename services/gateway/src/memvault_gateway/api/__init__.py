"""The JSON API under /api/v1: the owner's grants, tokens, vaults, members and accounts (`manage`), and
memories (`memories`)."""
