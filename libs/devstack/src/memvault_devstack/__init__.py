"""Local development stack: embedded Postgres and NATS, and the four services as processes."""
