"""The outbox: events written with the change that causes them, relayed to NATS JetStream."""
