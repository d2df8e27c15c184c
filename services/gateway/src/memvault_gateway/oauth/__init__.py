"""The OAuth 2.1 authorization server: discovery, client registration and metadata documents, redirect
URIs, /authorize (consent) and the token and revocation endpoints."""
