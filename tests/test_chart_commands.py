"""`make chart-check` derives the chart's maintenance commands from each image's real `--help`."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
HELPERS = ROOT / "charts" / "memvault" / "templates" / "_helpers.tpl"


def chart_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chart_check", ROOT / "scripts" / "chart_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def help_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`memvault-vault --help` and `memvault-indexer --help` of this checkout, as chart-check.sh saves them."""
    folder = tmp_path_factory.mktemp("help")
    files = {}
    for image in ("memvault-vault", "memvault-indexer"):
        out = subprocess.run(
            [str(Path(sys.executable).parent / image), "--help"], capture_output=True, text=True, check=True
        )
        files[image] = folder / f"{image}.help"
        files[image].write_text(out.stdout)
    return files


def run(helpers: Path, files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = chart_check().main(["commands", str(helpers), *(f"{image}={path}" for image, path in files.items())])
    return code, capsys.readouterr().out


def test_the_charts_commands_are_the_images_commands(
    help_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(HELPERS, help_files, capsys)
    assert code == 0, out
    assert chart_check().chart_commands(HELPERS)["memvault-vault"] >= {"retention", "backup", "sources"}


def test_a_command_the_image_lacks_fails_naming_it(
    help_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    drifted = tmp_path / "_helpers.tpl"
    drifted.write_text(HELPERS.read_text().replace('(list "reconcile"', '(list "reconcile" "rebuild"'))
    code, out = run(drifted, help_files, capsys)
    assert code == 1
    assert "'rebuild' is listed as a maintenance command of memvault-indexer, but `memvault-indexer --help`" in out


def test_a_new_subcommand_must_be_allowed_or_known_never_scheduled(
    help_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault_help = tmp_path / "vault.help"
    vault_help.write_text(help_files["memvault-vault"].read_text().replace(",restore}", ",restore,compact}"))
    code, out = run(HELPERS, {**help_files, "memvault-vault": vault_help}, capsys)
    assert code == 1
    assert "has a subcommand 'compact' that the chart neither allows as a CronJob" in out
