"""Translation between the gRPC wire and the domain; nothing else."""
