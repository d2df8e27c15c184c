"""Spans are recorded only when someone receives them; ids and log correlation stay either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

# setup_telemetry installs the process's one global provider, so each case runs in a fresh interpreter.
SCRIPT = """
import json, logging, sys
from opentelemetry import trace
from memvault_core.logging import setup_logging
from memvault_core.telemetry import setup_telemetry
setup_logging("test")
setup_telemetry("test")
tracer = trace.get_tracer("test")
with tracer.start_as_current_span("outer") as outer, tracer.start_as_current_span("inner") as inner:
    logging.getLogger("test").info("inside")
    print(json.dumps({
        "recording": [outer.is_recording(), inner.is_recording()],
        "trace_ids": [format(outer.get_span_context().trace_id, "032x"), format(inner.get_span_context().trace_id, "032x")],
        "valid": inner.get_span_context().is_valid,
    }))
"""


def python(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`script` in a fresh interpreter, with no OTEL_* variable but those given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-c", script], env={**clean, **env}, capture_output=True, text=True, check=True, timeout=60
    )


def run(**env: str) -> tuple[dict[str, object], dict[str, object]]:
    out = python(SCRIPT, **env)
    logged = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]
    return json.loads(out.stdout), next(entry for entry in logged if entry.get("message") == "inside")


def test_without_an_exporter_spans_are_not_recorded_but_keep_ids_for_the_logs() -> None:
    spans, log = run()
    assert spans["recording"] == [False, False]
    assert spans["valid"]
    trace_ids = spans["trace_ids"]
    assert isinstance(trace_ids, list) and trace_ids[0] == trace_ids[1] != "0" * 32
    assert log["trace_id"] == trace_ids[0] and log["message"] == "inside"


def test_with_an_exporter_every_span_is_recorded() -> None:
    # Nothing listens on the endpoint; spans are recorded and the exporter gives up on the way out.
    spans, log = run(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_EXPORTER_OTLP_TIMEOUT="1")
    assert spans["recording"] == [True, True]
    assert log["trace_id"] == spans["trace_ids"][0]  # type: ignore[index]


def test_a_sampler_chosen_in_the_environment_decides() -> None:
    spans, _ = run(OTEL_TRACES_SAMPLER="always_on")
    assert spans["recording"] == [True, True]


EDGE_SCRIPT = """
import json
from opentelemetry import propagate, trace
from memvault_core.telemetry import setup_telemetry
setup_telemetry("test", edge=True)
caller = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
taken = trace.get_current_span(propagate.extract(caller)).get_span_context()
with trace.get_tracer("test").start_as_current_span("request") as span:
    sent = {}
    propagate.inject(sent)
    own = format(span.get_span_context().trace_id, "032x")
print(json.dumps({"taken": taken.is_valid, "sent": sent.get("traceparent", ""), "own": own}))
"""


def test_the_edge_hands_its_trace_on_but_takes_none_from_its_callers() -> None:
    result = json.loads(python(EDGE_SCRIPT).stdout)
    assert result["taken"] is False
    assert result["own"] != "4bf92f3577b34da6a3ce929d0e0e4736"
    assert result["sent"].startswith(f"00-{result['own']}-")
