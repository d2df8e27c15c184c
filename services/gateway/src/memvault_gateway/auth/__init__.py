"""Shared identity: credentials, scopes, bearer tokens, people and browser sessions. Used by every wing;
imports only `web`, `store`, `context` and `settings`."""
