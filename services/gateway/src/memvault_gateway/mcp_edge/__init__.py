"""The /mcp edge: checks Host, Origin and the access token, forwards to the mcp service with a signed
identity, and points people who took a wrong turn to the right place (`signposts`)."""
