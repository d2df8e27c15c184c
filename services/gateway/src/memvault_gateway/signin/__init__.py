"""Owner sign-in: passwords and setup links, email links, OpenID Connect, a trusted forward-auth proxy,
and the plain /account pages."""
