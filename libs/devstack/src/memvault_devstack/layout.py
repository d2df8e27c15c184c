"""Where each part of a `Stack` is, and what each service is told: log files, the database and NATS
addresses, the identity secret (`identity-secret`, mode 600), ports and URLs, each service's environment
and readiness probe. `Stack` (stack.py) builds on `StackLayout` and adds the processes."""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from memvault_devstack.errors import DevstackError
from memvault_devstack.ports import LOOPBACK, free_ports
from memvault_devstack.processes import GrpcHealthProbe, HttpProbe, ReadinessProbe

SERVICES: tuple[str, ...] = ("vault", "indexer", "mcp", "gateway")
"""Every service, in start order (they stop in reverse)."""

OWNER_SUBJECT = "owner"
SECRET_FILE = "identity-secret"  # noqa: S105 (a file name)
_SECRET_MIN_LENGTH = 32


class StackLayout:
    """The addresses and environment of a stack; `Stack.__init__` sets the attributes declared here."""

    data_dir: Path
    services: tuple[str, ...]
    env: dict[str, str]
    service_env: dict[str, dict[str, str]]
    log_level: str
    _gateway_port: int | None
    _given_nats_url: str | None
    _postgres_dsn: str | None
    _nats_url: str | None
    _identity_secret: str | None
    _ports: dict[str, int] | None

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    def log_path(self, name: str) -> Path:
        """The log file of a service (or `postgres`, `nats`, `vault-setup`)."""
        return self.logs_dir / f"{name}.log"

    @property
    def postgres_dsn(self) -> str:
        return _started(self._postgres_dsn, "postgres_dsn")

    @property
    def nats_url(self) -> str:
        return _started(self._nats_url, "nats_url")

    @property
    def identity_secret(self) -> str:
        """The HMAC key gateway, mcp, vault and indexer share (kept in `identity-secret`)."""
        if self._identity_secret is None:
            self._identity_secret = load_identity_secret(self.data_dir / SECRET_FILE)
        return self._identity_secret

    @property
    def nats_namespace(self) -> str:
        """Empty on a NATS server of the stack's own; on a shared one (tests, CI), a name kept in
        `nats-namespace` so that this stack's streams and consumers never meet another's."""
        if self._given_nats_url is None:
            return ""
        path = self.data_dir / "nats-namespace"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"s{secrets.token_hex(6)}\n")
        return path.read_text().strip()

    @property
    def ports(self) -> Mapping[str, int]:
        """Port of each service (all four are chosen even when fewer run)."""
        if self._ports is None:
            self._ports = self._choose_ports()
        return self._ports

    @property
    def gateway_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['gateway']}"

    @property
    def mcp_url(self) -> str:
        """The MCP endpoint agents use: /mcp on the gateway."""
        return f"{self.gateway_url}/mcp"

    @property
    def connect_url(self) -> str:
        """The gateway's plain-markdown guide for agents."""
        return f"{self.gateway_url}/connect"

    @property
    def mcp_service_url(self) -> str:
        """The mcp service itself, bypassing the gateway (it trusts only signed identities)."""
        return f"http://{LOOPBACK}:{self.ports['mcp']}/mcp"

    @property
    def vault_address(self) -> str:
        return f"{LOOPBACK}:{self.ports['vault']}"

    @property
    def indexer_address(self) -> str:
        return f"{LOOPBACK}:{self.ports['indexer']}"

    def env_for(self, service: str) -> dict[str, str]:
        """The complete environment a service process gets."""
        ports = self.ports
        env = dict(os.environ)
        env.update(
            {
                "MEMVAULT_POSTGRES__DSN": self.postgres_dsn,
                "MEMVAULT_NATS__URL": self.nats_url,
                "MEMVAULT_NATS__NAMESPACE": self.nats_namespace,
                "MEMVAULT_IDENTITY__SECRET": self.identity_secret,
                "MEMVAULT_LOG__LEVEL": self.log_level,
                "PYTHONUNBUFFERED": "1",
                # Loopback traffic between the services must never go through a configured proxy.
                "NO_PROXY": _with_loopback(env.get("NO_PROXY")),
                "no_proxy": _with_loopback(env.get("no_proxy")),
            }
        )
        if service == "vault":
            env["MEMVAULT_VAULT__LISTEN"] = self.vault_address
            # Without an indexer in this stack the vault runs keyword-only, as it would deployed so.
            env["MEMVAULT_VAULT__INDEXER_ADDRESS"] = self.indexer_address if "indexer" in self.services else ""
        elif service == "indexer":
            env["MEMVAULT_INDEXER__LISTEN"] = self.indexer_address
            env["MEMVAULT_INDEXER__VAULT_ADDRESS"] = self.vault_address
            env["MEMVAULT_QDRANT__DATA_DIR"] = str(self.data_dir / "qdrant")
        elif service == "mcp":
            env["MEMVAULT_MCP__HOST"] = LOOPBACK
            env["MEMVAULT_MCP__PORT"] = str(ports["mcp"])
            env["MEMVAULT_MCP__VAULT_ADDRESS"] = self.vault_address
        elif service == "gateway":
            env["MEMVAULT_GATEWAY__HOST"] = LOOPBACK
            env["MEMVAULT_GATEWAY__PORT"] = str(ports["gateway"])
            env["MEMVAULT_GATEWAY__MCP_URL"] = self.mcp_service_url
            env["MEMVAULT_GATEWAY__VAULT_ADDRESS"] = self.vault_address
            env["MEMVAULT_GATEWAY__PUBLIC_URL"] = self.gateway_url
            env["MEMVAULT_GATEWAY__DEV_MODE"] = "true"
            env["MEMVAULT_GATEWAY__DEV_SUBJECT"] = OWNER_SUBJECT
        else:
            raise DevstackError(f"unknown service {service!r}; choose from {', '.join(SERVICES)}")
        env.update(self.env)
        env.update(self.service_env.get(service, {}))
        return env

    def _choose_ports(self) -> dict[str, int]:
        # Ports that `service_env` hands a service (a metrics port, say) were free when the caller chose
        # them and are free again now: the OS may offer them once more, so they are skipped.
        taken = {
            int(value)
            for values in self.service_env.values()
            for key, value in values.items()
            if key.endswith("PORT") and value.isdigit()
        }
        while True:
            vault, indexer, mcp, gateway = free_ports(4)
            if not taken & {vault, indexer, mcp, gateway}:
                return {"vault": vault, "indexer": indexer, "mcp": mcp, "gateway": self._gateway_port or gateway}

    def readiness_probe(self, service: str) -> ReadinessProbe:
        """What `wait_ready` polls for a service."""
        return self._probe(service)

    def _probe(self, service: str) -> ReadinessProbe:
        if service == "vault":
            return GrpcHealthProbe(self.vault_address)
        if service == "indexer":
            return GrpcHealthProbe(self.indexer_address)
        if service == "mcp":
            return HttpProbe(f"http://{LOOPBACK}:{self.ports['mcp']}/healthz")
        return HttpProbe(f"{self.gateway_url}/readyz")


def load_identity_secret(path: Path) -> str:
    """The secret stored at `path`, created (random, mode 600) on first use."""
    try:
        secret = path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        secret = secrets.token_urlsafe(48)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as stream:
            stream.write(secret + "\n")
        return secret
    if len(secret) < _SECRET_MIN_LENGTH:
        raise DevstackError(
            f"{path} holds a secret shorter than {_SECRET_MIN_LENGTH} characters; delete the file to make a new one"
        )
    return secret


def _started(value: str | None, what: str) -> str:
    if value is None:
        raise DevstackError(f"{what} is known once the stack has started; call start() first")
    return value


def _with_loopback(no_proxy: str | None) -> str:
    entries = [entry for entry in (no_proxy or "").split(",") if entry]
    for host in ("127.0.0.1", "localhost", "::1"):
        if host not in entries:
            entries.append(host)
    return ",".join(entries)
