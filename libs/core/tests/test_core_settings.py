"""Loading settings: every problem named by its variable, typos in a known group included."""

import re
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

from memvault_core.settings import load_settings, near_misses, unknown_variables
from memvault_vault.settings import Settings as VaultSettings

pytestmark = pytest.mark.unit

SECRET = "s" * 40


def test_a_misspelt_field_of_a_known_group_is_named_with_the_fields_it_has() -> None:
    environ = {
        "MEMVAULT_VAULT__INDEXER_ADRESS": "indexer:50052",  # the typo
        "MEMVAULT_VAULT__INDEXER_ADDRESS": "indexer:50052",
        "MEMVAULT_EMBEDDER__THREADS": "2",  # the indexer's group: not the vault's business
        "MEMVAULT_TEST_POSTGRES_DSN": "postgresql://x",  # no group at all
        "MEMVAULT_IDENTITY__SECRET": SECRET,
        "PATH": "/usr/bin",
    }
    (problem,) = unknown_variables(VaultSettings, environ)
    assert problem.startswith("MEMVAULT_VAULT__INDEXER_ADRESS: not a setting")
    assert "MEMVAULT_VAULT__INDEXER_ADDRESS" in problem


def test_load_settings_exits_listing_unknown_and_invalid_variables(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMVAULT_IDENTITY__SECRET", "short")
    monkeypatch.setenv("MEMVAULT_LOG__LEVL", "DEBUG")
    with pytest.raises(SystemExit) as exited:
        load_settings(VaultSettings)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "invalid configuration (2 problem(s))" in err
    assert "MEMVAULT_LOG__LEVL: not a setting (this group has MEMVAULT_LOG__LEVEL)" in err
    assert "MEMVAULT_IDENTITY__SECRET: Value error, must be at least 32 characters" in err


def test_a_missing_group_is_named_by_the_variables_to_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MEMVAULT_IDENTITY__SECRET", raising=False)
    with pytest.raises(SystemExit):
        load_settings(VaultSettings)
    assert "MEMVAULT_IDENTITY__SECRET: is required but not set" in capsys.readouterr().err


def test_near_misses_are_warned_about_with_the_setting_meant(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    environ = {
        "MEMVAULT_VAULT_INDEXER_ADDRESS": "indexer:50052",  # one underscore where two belong
        "MEMVAULT_VAULTS__INDEXER_ADDRESS": "indexer:50052",  # a group one letter off
        "MEMVAULT_EMBEDDER__THREADS": "2",  # another service's setting: fine
        "MEMVAULT_TEST_POSTGRES_DSN": "postgresql://x",  # not a setting of anything: fine
    }
    assert near_misses(VaultSettings, environ) == [
        "MEMVAULT_VAULTS__INDEXER_ADDRESS is not a setting; did you mean MEMVAULT_VAULT__INDEXER_ADDRESS?",
        "MEMVAULT_VAULT_INDEXER_ADDRESS is not a setting; did you mean MEMVAULT_VAULT__INDEXER_ADDRESS?",
    ]
    monkeypatch.setenv("MEMVAULT_IDENTITY__SECRET", SECRET)
    monkeypatch.setenv("MEMVAULT_VAULT_INDEXER_ADDRESS", "indexer:50052")
    assert load_settings(VaultSettings).vault.indexer_address == ""  # a warning, not a refusal
    assert "did you mean MEMVAULT_VAULT__INDEXER_ADDRESS?" in capsys.readouterr().err


def test_load_settings_accepts_a_clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_IDENTITY__SECRET", SECRET)
    monkeypatch.setenv("MEMVAULT_VAULT__LISTEN", "127.0.0.1:6000")
    assert load_settings(VaultSettings).vault.listen == "127.0.0.1:6000"


ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "memvault" / "templates"
NAME = re.compile(r"^\s*- name: ((?:MEMVAULT|OTEL)_[A-Z0-9_]+)", re.MULTILINE)
INCLUDE = re.compile(r'include "(memvault\.env\.[a-z]+)"')
DEFINE = re.compile(
    r'\{\{- define "(memvault\.env\.[a-z]+)" -\}\}(.*?)\{\{- end \}\}\n(?=\n|\{\{/\*|\{\{- define|$)', re.DOTALL
)


def _settings() -> dict[str, list[type[BaseSettings]]]:
    from memvault_gateway import settings as gateway
    from memvault_indexer import settings as indexer
    from memvault_mcp import settings as mcp
    from memvault_vault import settings as vault

    return {
        "gateway": [gateway.Settings],
        "mcp": [mcp.Settings],
        "vault": [vault.Settings],
        "indexer": [indexer.Settings],
        "migrate": [vault.MigrateSettings, gateway.MigrateSettings],
    }


def _chart_names(text: str, defines: dict[str, str]) -> set[str]:
    names = set(NAME.findall(text))
    for included in INCLUDE.findall(text):
        names |= _chart_names(defines[included], defines)
    return names


def _compose_names() -> dict[str, set[str]]:
    services: dict[str, set[str]] = {}
    current = ""
    for line in (ROOT / "docker-compose.yml").read_text().splitlines():
        if service := re.match(r"^  ([a-z][a-z-]*):$", line):
            current = service.group(1)
        elif variable := re.match(r"^\s+(MEMVAULT_[A-Z0-9_]+):", line):
            services.setdefault(current, set()).add(variable.group(1))
    return services


def test_every_variable_the_chart_and_compose_set_is_a_setting_of_its_service() -> None:
    defines = dict(DEFINE.findall((CHART / "_helpers.tpl").read_text()))
    assert {"memvault.env.vault", "memvault.env.indexer", "memvault.env.common"} <= defines.keys()
    given = {
        f"chart {service}": (_chart_names((CHART / f"{file}.yaml").read_text(), defines), service)
        for service, file in [
            ("gateway", "gateway"),
            ("mcp", "mcp"),
            ("vault", "vault"),
            ("indexer", "indexer"),
            ("migrate", "migrate-job"),
        ]
    }
    given |= {f"compose {service}": (names, service) for service, names in _compose_names().items()}
    assert {"chart vault", "compose vault", "compose indexer", "compose gateway"} <= given.keys()
    settings = _settings()
    for where, (names, service) in given.items():
        assert names, where
        environ = dict.fromkeys(names, "")
        for cls in settings[service]:
            assert not unknown_variables(cls, environ), where
        assert any(name.startswith("MEMVAULT_") for name in names), where


def test_nats_url_may_list_the_nodes_of_a_cluster() -> None:
    from pydantic import ValidationError

    from memvault_core.settings import NatsSettings

    settings = NatsSettings(url="nats://a:4222, nats://b:4222,nats://c:4222", stream_replicas=3)
    assert settings.servers == ["nats://a:4222", "nats://b:4222", "nats://c:4222"]
    assert NatsSettings().stream_replicas == 1
    with pytest.raises(ValidationError, match="several separated by commas"):
        NatsSettings(url="nats://a:4222,http://b:4222")
    with pytest.raises(ValidationError):
        NatsSettings(stream_replicas=0)
