"""Gateway settings (`MEMVAULT_*` environment variables)."""

from __future__ import annotations

import ipaddress
from email.utils import parseaddr
from typing import Literal, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from memvault_core.metrics import MetricsSettings
from memvault_core.settings import IdentitySettings, LogSettings, PostgresSettings, ServiceSettings

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def is_loopback_host(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _https_or_loopback(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(parts.hostname or "")):
        return value
    raise ValueError("must be an https:// URL (plain http:// only for 127.0.0.1, localhost or [::1])")


class GatewayGroup(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    public_url: str = "http://127.0.0.1:8080"
    """The URL agents and browsers use to reach this gateway, without a trailing slash. It is the
    OAuth issuer; the MCP resource is `<public_url>/mcp`. https unless it is a loopback address."""
    mcp_url: str = "http://127.0.0.1:8090/mcp"
    vault_address: str = "127.0.0.1:50051"
    allowed_origins: list[str] = []
    """Extra browser origins allowed to call /mcp, besides the public URL's own."""
    extra_hosts: list[str] = []
    """Other host names (`name` for any port, or `name:port`) /mcp answers for, besides the public
    URL's host and port; for a proxy that sends its own Host. Any other Host gets 421 (DNS rebinding)."""
    dev_mode: bool = False
    """Answer /mcp requests from loopback addresses that carry no token as `dev_subject`. Never on a server."""
    dev_subject: str = "owner"
    upstream_timeout_seconds: float = Field(default=60.0, gt=0)
    test_auto_approve_subject: str = ""
    """Tests only: approve every authorization request as this account without asking. Refused unless
    both `host` and `public_url` are loopback addresses."""

    @field_validator("mcp_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")

    @field_validator("extra_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        cleaned = [h.strip().lower() for h in value if h.strip()]
        for entry in cleaned:
            try:
                parts = urlsplit(f"//{entry}")
                valid = bool(parts.hostname) and not (parts.path or parts.query or parts.username)
                parts.port  # noqa: B018 (raises on a bad port)
            except ValueError:
                valid = False
            if not valid:
                raise ValueError(f"{entry!r} is not a host name or host:port (no scheme, no path)")
        return cleaned

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str) -> str:
        value = value.rstrip("/")
        parts = urlsplit(value)
        if parts.query or parts.fragment:
            raise ValueError("must not have a query or fragment")
        return _https_or_loopback(value)

    @model_validator(mode="after")
    def _auto_approve_only_on_loopback(self) -> Self:
        # The public URL too: a gateway listening on 127.0.0.1 behind a local reverse proxy serves the internet.
        on_loopback = is_loopback_host(self.host) and is_loopback_host(urlsplit(self.public_url).hostname or "")
        if self.test_auto_approve_subject and not on_loopback:
            raise ValueError(
                "MEMVAULT_GATEWAY__TEST_AUTO_APPROVE_SUBJECT approves every agent without asking; it is allowed only "
                "while MEMVAULT_GATEWAY__HOST is a loopback address and MEMVAULT_GATEWAY__PUBLIC_URL a loopback URL "
                f"(http://127.0.0.1, http://localhost or http://[::1]); they are {self.host!r} and {self.public_url!r}"
            )
        return self


class OAuthGroup(BaseModel):
    access_token_seconds: int = Field(default=3600, ge=1, le=86400)
    refresh_token_days: int = Field(default=90, ge=1, le=365)
    authorization_code_seconds: int = Field(default=120, ge=10, le=600)
    extra_redirect_schemes: list[str] = []
    """Private-use URI schemes (RFC 8252) a registering app may redirect to, e.g. `cursor`. By default
    only https and loopback http redirects are accepted."""
    metadata_documents: bool = True
    """Accept https URLs as client_id and fetch the client's metadata document from them."""
    metadata_document_private_addresses: bool = False
    """Let metadata document URLs point at loopback and private addresses (tests and closed networks)."""

    @field_validator("extra_redirect_schemes")
    @classmethod
    def _schemes(cls, value: list[str]) -> list[str]:
        cleaned = [s.strip().lower().rstrip(":/") for s in value if s.strip()]
        for scheme in cleaned:
            if scheme in ("http", "https", "javascript", "data", "file", "vbscript") or not scheme.isascii():
                raise ValueError(f"{scheme!r} cannot be a private-use redirect scheme")
        return cleaned


class LoginGroup(BaseModel):
    local_accounts: bool = True
    """Sign in with a username and password kept (argon2id) by the gateway."""
    session_hours: int = Field(default=12, ge=1, le=24 * 30)
    setup_link_hours: int = Field(default=24, ge=1, le=24 * 14)


class OidcGroup(BaseModel):
    issuer: str = ""
    """The identity provider's issuer URL (Authelia, Authentik, Keycloak, Google...). Empty: off."""
    client_id: str = ""
    client_secret: SecretStr = SecretStr("")
    scopes: str = "openid profile email"
    button_label: str = "Sign in with single sign-on"
    create_accounts: bool = True
    """Create an account the first time someone signs in through the provider. Off: only people an
    administrator added (by their provider subject) may sign in."""

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, value: str) -> str:
        return _https_or_loopback(value.rstrip("/")) if value else value

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.issuer and not self.client_id:
            raise ValueError("MEMVAULT_OIDC__CLIENT_ID is required when MEMVAULT_OIDC__ISSUER is set")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.issuer)


class ForwardAuthGroup(BaseModel):
    header: str = ""
    """Header naming the signed-in user, set by a trusted proxy (Authelia, Authentik, oauth2-proxy),
    e.g. `Remote-User`. Empty: off."""
    name_header: str = ""
    """Optional header with the user's display name, e.g. `Remote-Name`."""
    trusted_proxies: list[str] = []
    """Addresses or networks (CIDR) of the proxies allowed to set `header`; from anywhere else it is ignored."""
    create_accounts: bool = True

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or CIDR network") from None
        return value

    @model_validator(mode="after")
    def _needs_proxies(self) -> Self:
        if self.header and not self.trusted_proxies:
            raise ValueError(
                "MEMVAULT_FORWARD_AUTH__TRUSTED_PROXIES must list the proxy addresses when "
                "MEMVAULT_FORWARD_AUTH__HEADER is set"
            )
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.header)

    def trusts(self, address: str | None) -> bool:
        if not address:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in ipaddress.ip_network(entry, strict=False) for entry in self.trusted_proxies)


class SmtpGroup(BaseModel):
    """The mail server that sends email sign-in links. Email sign-in is off while `host` is empty."""

    host: str = ""
    """The SMTP server, e.g. `smtp.example.lan`. Empty: no email sign-in."""
    port: int = Field(default=587, ge=1, le=65535)
    security: Literal["starttls", "tls", "none"] = "starttls"
    """`starttls` (usually port 587), `tls` (implicit TLS, usually 465), or `none` (a relay on this
    machine or in the cluster; the link then crosses the network in clear text)."""
    username: str = ""
    password: SecretStr = SecretStr("")
    from_address: str = ""
    """The sender of sign-in links, e.g. `memvault <memvault@example.lan>`; required with `host`."""
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)

    @field_validator("from_address")
    @classmethod
    def _address(cls, value: str) -> str:
        value = value.strip()
        if "\r" in value or "\n" in value or (value and "@" not in parseaddr(value)[1]):
            raise ValueError("must be an email address, e.g. memvault@example.lan or 'memvault <memvault@example.lan>'")
        return value

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if not self.host:
            return self
        if not self.from_address:
            raise ValueError(
                "MEMVAULT_SMTP__FROM_ADDRESS is required when MEMVAULT_SMTP__HOST is set (the sender of sign-in links)"
            )
        if bool(self.username) != bool(self.password.get_secret_value()):
            raise ValueError("set both MEMVAULT_SMTP__USERNAME and MEMVAULT_SMTP__PASSWORD, or neither")
        if self.username and self.security == "none" and not is_loopback_host(self.host):
            raise ValueError(
                "MEMVAULT_SMTP__SECURITY=none would send the SMTP password in clear text to "
                f"{self.host!r}; use starttls or tls"
            )
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.host)


class Settings(ServiceSettings):
    gateway: GatewayGroup = GatewayGroup()
    oauth: OAuthGroup = OAuthGroup()
    login: LoginGroup = LoginGroup()
    oidc: OidcGroup = OidcGroup()
    forward_auth: ForwardAuthGroup = ForwardAuthGroup()
    smtp: SmtpGroup = SmtpGroup()
    postgres: PostgresSettings = PostgresSettings()
    identity: IdentitySettings
    log: LogSettings = LogSettings()
    metrics: MetricsSettings = MetricsSettings()


class MigrateSettings(ServiceSettings):
    """`migrate` and `setup-link` need only the database and the public URL."""

    gateway: GatewayGroup = GatewayGroup()
    login: LoginGroup = LoginGroup()
    postgres: PostgresSettings = PostgresSettings()
    log: LogSettings = LogSettings()

    @property
    def database_given(self) -> bool:
        """Whether MEMVAULT_POSTGRES__DSN was set: these commands must never guess a database, since
        the default address may well be some other Postgres on this machine."""
        return "dsn" in self.postgres.model_fields_set
