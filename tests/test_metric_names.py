"""The series the services export are the ones the chart's alerts and dashboard may query
(scripts/chart_check.py's EXPORTED_METRICS), so neither can drift from the code unnoticed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import memvault_indexer.metrics
import memvault_mcp.middleware
import memvault_vault.metrics
from memvault_core.metrics import ERRORS, GRPC_SECONDS, HTTP_SECONDS, POOL_CONNECTIONS, REGISTRY

pytestmark = pytest.mark.unit

CHART_CHECK = Path(__file__).resolve().parent.parent / "scripts" / "chart_check.py"


def test_the_chart_knows_every_exported_series_and_no_other() -> None:
    assert memvault_indexer.metrics.EMBED_SECONDS and memvault_vault.metrics.OUTBOX_DEPTH
    assert memvault_mcp.middleware.TOOL_SECONDS
    spec = importlib.util.spec_from_file_location("chart_check", CHART_CHECK)
    assert spec is not None and spec.loader is not None
    chart_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chart_check)
    exported = {family.name for family in REGISTRY.collect()}
    assert exported == chart_check.EXPORTED_METRICS


def test_no_series_is_labelled_service() -> None:
    """Prometheus's Kubernetes discovery sets `service` to the Service's name; ours would be renamed."""
    labelled = [GRPC_SECONDS, HTTP_SECONDS, ERRORS, POOL_CONNECTIONS, memvault_mcp.middleware.TOOL_SECONDS]
    for metric in labelled:
        names = metric._labelnames
        assert (
            names
            and "service" not in names
            and (metric is memvault_mcp.middleware.TOOL_SECONDS or "component" in names)
        )
