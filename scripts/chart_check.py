"""Assertions behind `make chart-check` that no linter makes for us.

    python scripts/chart_check.py rendered FILE...     rendered chart manifests
    python scripts/chart_check.py schema FILE          charts/memvault/values.schema.json
    python scripts/chart_check.py compose COMPOSE ENV  docker-compose.yml against .env.example
    python scripts/chart_check.py commands HELPERS IMAGE=HELP_FILE...
                                                      the chart's maintenance commands against each
                                                      image's `--help` (argparse's subcommand list)

Each subcommand prints one line per failed assertion and a closing count, and exits 1 on any
failure. It runs in the tools venv (.tools/venv: PyYAML, compose-spec).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

Manifest = dict[str, Any]

POD_TEMPLATE_PATHS = {
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Pod": ("spec",),
}
# Environment variables that carry credentials by name.
SECRET_NAME = re.compile(r"(SECRET|PASSWORD|PASSWD|TOKEN|API_KEY|__DSN)$")
# A URL with user:password@ in it.
CREDENTIALS_IN_URL = re.compile(r"^[a-z][a-z0-9+.-]*://[^/@\s]+:[^/@\s]+@")
# Who may reach each component (by app.kubernetes.io/component); None means any source.
ALLOWED_SOURCES: dict[str, set[str] | None] = {
    "gateway": None,
    "mcp": {"gateway"},
    "vault": {"gateway", "mcp", "indexer", "migrate", "maintenance"},
    "indexer": {"vault", "maintenance"},
}
GRPC_COMPONENTS = {"vault", "indexer"}
# Every series the services export (memvault_core.metrics, memvault_vault.metrics,
# memvault_indexer.metrics, memvault_mcp.middleware); tests/test_metric_names.py keeps this in step.
# Alerts and dashboard panels may query only these.
EXPORTED_METRICS = {
    "memvault_grpc_server_handling_seconds",
    "memvault_http_request_duration_seconds",
    "memvault_errors",
    "memvault_db_pool_connections",
    "memvault_tool_call_seconds",
    "memvault_outbox_depth",
    "memvault_outbox_oldest_age_seconds",
    "memvault_index_pending",
    "memvault_index_lag_seconds",
    "memvault_index_failed",
    "memvault_embedding_seconds",
    "memvault_embedded_texts",
    "memvault_indexer_events_pending",
    "memvault_dead_letters",
}
SERIES_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")
ALERTS = {"MemvaultIndexLag", "MemvaultOutboxStuck", "MemvaultDeadLetters", "MemvaultErrorRate"}
OPERATIONS_DOC = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
HELPERS = Path(__file__).resolve().parents[1] / "charts" / "memvault" / "templates" / "_helpers.tpl"
# The commands of each image that the chart never schedules: serving, one-off or destructive ones.
# Every other subcommand of `memvault-<component> --help` must be allowed as a CronJob in HELPERS, so
# a command added to a service fails `make chart-check` until someone decides which it is.
NOT_SCHEDULED = {
    "memvault-vault": {"serve", "rollback", "create-owner", "restore"},
    "memvault-indexer": {"serve", "index-job", "collections", "drop-collection"},
}
_CHART_COMMANDS = re.compile(r"\$commands\s*:=\s*dict\s+((?:\"[a-z]+\"\s*\((?:list)?(?:\s*\"[a-z-]+\")*\s*\)\s*)+)")
_CHART_COMPONENT = re.compile(r"\"([a-z]+)\"\s*\((?:list)?((?:\s*\"[a-z-]+\")*)\s*\)")
# argparse's usage shows the subcommands as `{serve,migrate,...}`.
_HELP_COMMANDS = re.compile(r"\{([a-z-]+(?:,[a-z-]+)*)\}")


def chart_commands(helpers: Path = HELPERS) -> dict[str, set[str]]:
    """The maintenance commands the chart accepts for a CronJob, by image (`memvault-<component>`),
    read from the `$commands` dict in the chart's _helpers.tpl."""
    found = _CHART_COMMANDS.search(helpers.read_text())
    if found is None:
        raise SystemExit(f"{helpers}: no `$commands := dict ...` line listing the maintenance commands")
    return {
        f"memvault-{component}": set(re.findall(r'"([a-z-]+)"', names))
        for component, names in _CHART_COMPONENT.findall(found.group(1))
    }


def help_commands(help_text: str) -> set[str]:
    """The subcommands an argparse `--help` lists (`{serve,migrate,...}`)."""
    found = _HELP_COMMANDS.search(help_text)
    return set(found.group(1).split(",")) if found else set()


def check_commands(helpers: str, help_files: list[str]) -> int:
    """The chart's maintenance commands are subcommands each image really has, and every subcommand
    is either allowed as a CronJob or known never to be scheduled."""
    checks = Checks()
    allowed = chart_commands(Path(helpers))
    images: dict[str, set[str]] = {}
    for argument in help_files:
        image, _, path = argument.partition("=")
        images[image] = help_commands(Path(path).read_text())
        checks.check(bool(images[image]), f"{path}: no subcommands found in `{image} --help`")
    for image in sorted(set(allowed) - set(images)):
        checks.check(False, f"{helpers}: commands listed for {image}, whose --help was not given")
    for image, real in sorted(images.items()):
        listed = allowed.get(image, set())
        for command in sorted(listed - real):
            checks.check(
                False,
                f"{helpers}: '{command}' is listed as a maintenance command of {image}, but `{image} --help` "
                f"has no such subcommand (it has: {', '.join(sorted(real))}); remove it or fix its name",
            )
        never = NOT_SCHEDULED.get(image, set())
        for command in sorted(real - listed - never):
            checks.check(
                False,
                f"`{image} --help` has a subcommand '{command}' that the chart neither allows as a CronJob "
                f"({helpers}, $commands) nor lists as never scheduled (scripts/chart_check.py, "
                "NOT_SCHEDULED): add it to one of them",
            )
        for command in sorted(never - real):
            checks.check(False, f"scripts/chart_check.py NOT_SCHEDULED names '{command}', which {image} does not have")
        for command in sorted(never & listed):
            checks.check(False, f"'{command}' of {image} is both allowed as a CronJob and listed as never scheduled")
        checks.passed += len(real & (listed | never)) - len(never & listed)
    return checks.report(f"maintenance commands of {len(images)} image(s) against their --help")


class Checks:
    """Collects assertion results so one run reports every problem, not just the first."""

    def __init__(self) -> None:
        self.passed = 0
        self.failures: list[str] = []

    def check(self, condition: bool, message: str) -> None:
        if condition:
            self.passed += 1
        else:
            self.failures.append(message)

    def report(self, what: str) -> int:
        for failure in self.failures:
            print(f"FAIL {failure}")
        print(f"{what}: {self.passed} passed, {len(self.failures)} failed")
        return 1 if self.failures else 0


def dig(node: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def load_manifests(paths: list[str]) -> Iterator[tuple[str, Manifest]]:
    for path in paths:
        for document in yaml.safe_load_all(Path(path).read_text()):
            if document:
                yield Path(path).name, document


def label(manifest: Manifest, key: str) -> str:
    return str(dig(manifest, ("metadata", "labels", key)) or "")


def check_pod(checks: Checks, where: str, pod: dict[str, Any]) -> None:
    """Pod Security Standard "restricted" plus this project's own rules."""
    security = pod.get("securityContext") or {}
    checks.check(security.get("runAsNonRoot") is True, f"{where}: pod runAsNonRoot is not true")
    checks.check(security.get("runAsUser", 1) != 0, f"{where}: pod runs as uid 0")
    checks.check(
        dig(security, ("seccompProfile", "type")) == "RuntimeDefault",
        f"{where}: pod seccompProfile is not RuntimeDefault",
    )
    checks.check(pod.get("automountServiceAccountToken") is False, f"{where}: service account token mounted")
    for host_field in ("hostNetwork", "hostPID", "hostIPC"):
        checks.check(not pod.get(host_field), f"{where}: {host_field} is set")
    for volume in pod.get("volumes") or []:
        checks.check("hostPath" not in volume, f"{where}: hostPath volume {volume.get('name')}")
    containers = (pod.get("initContainers") or []) + (pod.get("containers") or [])
    checks.check(bool(containers), f"{where}: no containers")
    for container in containers:
        name = f"{where}/{container.get('name')}"
        context = container.get("securityContext") or {}
        checks.check(context.get("runAsUser", 1) != 0, f"{name}: runs as uid 0")
        checks.check(
            context.get("runAsNonRoot", security.get("runAsNonRoot")) is True, f"{name}: runAsNonRoot not true"
        )
        checks.check(context.get("allowPrivilegeEscalation") is False, f"{name}: privilege escalation allowed")
        checks.check(context.get("readOnlyRootFilesystem") is True, f"{name}: root file system writable")
        checks.check(not context.get("privileged"), f"{name}: privileged")
        checks.check("ALL" in (dig(context, ("capabilities", "drop")) or []), f"{name}: capabilities not dropped")
        checks.check(not dig(context, ("capabilities", "add")), f"{name}: capabilities added")
        image = str(container.get("image", ""))
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        checks.check(bool(tag) and tag != "latest", f"{name}: image {image!r} has no pinned tag")
        resources = container.get("resources") or {}
        checks.check(bool(dig(resources, ("requests", "memory"))), f"{name}: no memory request")
        checks.check(bool(dig(resources, ("limits", "memory"))), f"{name}: no memory limit")
        for variable in container.get("env") or []:
            check_env(checks, name, variable)
        checks.check(not container.get("envFrom"), f"{name}: envFrom hides where values come from")


def check_env(checks: Checks, where: str, variable: dict[str, Any]) -> None:
    """Secrets reach containers only through secretKeyRef, never as literal values."""
    env_name = str(variable.get("name"))
    value = variable.get("value")
    if SECRET_NAME.search(env_name):
        checks.check(
            value is None and bool(dig(variable, ("valueFrom", "secretKeyRef"))),
            f"{where}: {env_name} is not read from a Secret",
        )
    if isinstance(value, str):
        checks.check(not CREDENTIALS_IN_URL.match(value), f"{where}: {env_name} has credentials inline")


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        present = expression["key"] in labels
        inside = labels.get(expression["key"]) in (expression.get("values") or [])
        operator = expression["operator"]
        if (operator == "In" and not inside) or (operator == "NotIn" and inside):
            return False
        if (operator == "Exists" and not present) or (operator == "DoesNotExist" and present):
            return False
    return True


def allowed_components(
    policy: Manifest, release_labels: dict[str, str], metrics_ports: frozenset[int] = frozenset()
) -> set[str] | None:
    """Components of this release a policy lets in; None when any source may connect. A rule that
    opens only the metrics port is left out (Prometheus scrapes it from elsewhere)."""
    allowed: set[str] = set()
    for rule in dig(policy, ("spec", "ingress")) or []:
        ports = {p.get("port") for p in rule.get("ports") or []}
        if ports and ports <= metrics_ports:
            continue
        peers = rule.get("from")
        if not peers:
            return None
        for peer in peers:
            if "ipBlock" in peer or "namespaceSelector" in peer:
                return None
            for component in ("gateway", "mcp", "vault", "indexer", "migrate", "maintenance", "test"):
                if selects(peer.get("podSelector") or {}, {**release_labels, "app.kubernetes.io/component": component}):
                    allowed.add(component)
    return allowed


def check_rendered(paths: list[str]) -> int:
    checks = Checks()
    by_file: dict[str, list[Manifest]] = {}
    for file_name, manifest in load_manifests(paths):
        by_file.setdefault(file_name, []).append(manifest)
    for file_name, manifests in sorted(by_file.items()):
        check_release(checks, file_name, manifests)
    return checks.report(f"rendered-output assertions over {len(paths)} file(s)")


def check_release(checks: Checks, file_name: str, manifests: list[Manifest]) -> None:
    kinds: dict[str, list[Manifest]] = {}
    for manifest in manifests:
        kinds.setdefault(manifest["kind"], []).append(manifest)

    for manifest in manifests:
        path = POD_TEMPLATE_PATHS.get(manifest["kind"])
        if path:
            where = f"{file_name}:{manifest['kind']}/{manifest['metadata']['name']}"
            check_pod(checks, where, dig(manifest, path) or {})

    deployments = {label(d, "app.kubernetes.io/component"): d for d in kinds.get("Deployment", [])}
    checks.check(
        set(deployments) == {"gateway", "mcp", "vault", "indexer"},
        f"{file_name}: Deployments are {sorted(deployments)}, expected the four services",
    )
    for component, deployment in deployments.items():
        container = (dig(deployment, ("spec", "template", "spec", "containers")) or [{}])[0]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            kind = "grpc" if component in GRPC_COMPONENTS else "httpGet"
            checks.check(kind in (container.get(probe) or {}), f"{file_name}: {component} has no {kind} {probe}")

    metrics_ports = frozenset(
        int(port["containerPort"])
        for deployment in deployments.values()
        for container in dig(deployment, ("spec", "template", "spec", "containers")) or []
        for port in container.get("ports") or []
        if port.get("name") == "metrics"
    )
    check_metrics(checks, file_name, kinds, deployments)

    policies = kinds.get("NetworkPolicy", [])
    if policies:
        for component, deployment in deployments.items():
            pod_labels = dig(deployment, ("spec", "template", "metadata", "labels")) or {}
            release = {k: v for k, v in pod_labels.items() if k != "app.kubernetes.io/component"}
            covering = [p for p in policies if selects(dig(p, ("spec", "podSelector")) or {}, pod_labels)]
            checks.check(bool(covering), f"{file_name}: no NetworkPolicy selects {component}")
            for policy in covering:
                allowed = allowed_components(policy, release, metrics_ports)
                expected = ALLOWED_SOURCES[component]
                if expected is None:
                    continue
                checks.check(
                    allowed is not None and allowed - {"test"} <= expected,
                    f"{file_name}: {component} is reachable from {sorted(allowed or {'anywhere'})}",
                )
    else:
        checks.check(False, f"{file_name}: no NetworkPolicy rendered (networkPolicy.enabled?)")

    gateway_service = dig(deployments.get("gateway", {}), ("metadata", "name"))
    for service in kinds.get("Service", []):
        checks.check(
            dig(service, ("spec", "type")) in (None, "ClusterIP"),
            f"{file_name}: Service {service['metadata']['name']} is exposed outside the cluster",
        )
    for ingress in kinds.get("Ingress", []):
        for rule in dig(ingress, ("spec", "rules")) or []:
            for path in dig(rule, ("http", "paths")) or []:
                backend = dig(path, ("backend", "service", "name"))
                checks.check(backend == gateway_service, f"{file_name}: Ingress routes to {backend}")
    for route in kinds.get("HTTPRoute", []):
        for rule in dig(route, ("spec", "rules")) or []:
            for backend in rule.get("backendRefs") or []:
                checks.check(
                    backend.get("name") == gateway_service, f"{file_name}: HTTPRoute routes to {backend.get('name')}"
                )

    for secret in kinds.get("Secret", []):
        name = secret["metadata"]["name"]
        generated = name.endswith("-identity") and (
            dig(secret, ("metadata", "annotations", "helm.sh/resource-policy")) == "keep"
        )
        checks.check(generated, f"{file_name}: Secret {name} is rendered from values (use existingSecret)")
    for config_map in kinds.get("ConfigMap", []):
        for key in config_map.get("data") or {}:
            checks.check(
                not SECRET_NAME.search(key.upper()), f"{file_name}: ConfigMap key {key} looks like a credential"
            )

    for hpa in kinds.get("HorizontalPodAutoscaler", []):
        target = dig(hpa, ("spec", "scaleTargetRef", "name"))
        scaled = next((d for d in deployments.values() if d["metadata"]["name"] == target), None)
        checks.check(scaled is not None, f"{file_name}: HPA targets missing Deployment {target}")
        if scaled is not None:
            checks.check("replicas" not in scaled["spec"], f"{file_name}: {target} fixes replicas under an HPA")
    commands = chart_commands()  # checked against each image's --help by `commands`
    for cron in kinds.get("CronJob", []):
        name = cron["metadata"]["name"]
        for container in dig(cron, POD_TEMPLATE_PATHS["CronJob"] + ("containers",)) or []:
            image = str(container.get("image", "")).rsplit("/", 1)[-1].split(":", 1)[0]
            args = container.get("args") or []
            known = commands.get(image, set())
            checks.check(bool(args) and args[0] in known, f"{file_name}: CronJob {name} runs {args[:1]} on {image}")
            if args[:1] == ["backup"] and "--dir" in args:
                target = args[args.index("--dir") + 1]
                mounts = {m.get("mountPath") for m in container.get("volumeMounts") or []}
                checks.check(target in mounts, f"{file_name}: CronJob {name} writes to {target}, which is not mounted")
    retention_jobs = [
        c
        for c in kinds.get("CronJob", [])
        if not dig(c, ("spec", "suspend"))
        and any(
            (container.get("args") or [])[:1] == ["retention"]
            for container in dig(c, POD_TEMPLATE_PATHS["CronJob"] + ("containers",)) or []
        )
    ]
    vault = deployments.get("vault")
    if vault is not None:
        env = {
            e.get("name"): e.get("value")
            for container in dig(vault, POD_TEMPLATE_PATHS["Deployment"] + ("containers",)) or []
            for e in container.get("env") or []
        }
        in_process = env.get("MEMVAULT_VAULT__RETENTION_INTERVAL_SECONDS") != "0"
        checks.check(
            in_process != bool(retention_jobs),
            f"{file_name}: retention runs {'in the vault and ' if in_process else ''}"
            f"{'as a CronJob' if retention_jobs else 'nowhere'}",
        )
        schedules = {dig(c, ("spec", "schedule")) for c in retention_jobs}
        checks.check(
            in_process or env.get("MEMVAULT_VAULT__RETENTION_SCHEDULE") in schedules,
            f"{file_name}: the vault is not told the retention CronJob's schedule (MEMVAULT_VAULT__RETENTION_SCHEDULE)",
        )
    # A NATS cluster must keep the events stream on several nodes, or losing one node loses events.
    nats_sets = [s for s in kinds.get("StatefulSet", []) if label(s, "app.kubernetes.io/name") == "nats"]
    nats_nodes = int(dig(nats_sets[0], ("spec", "replicas")) or 1) if nats_sets else None
    for component, deployment in deployments.items():
        variables = {
            e.get("name"): e.get("value")
            for container in dig(deployment, POD_TEMPLATE_PATHS["Deployment"] + ("containers",)) or []
            for e in container.get("env") or []
        }
        if "MEMVAULT_NATS__URL" not in variables:
            continue  # gateway and mcp do not use NATS
        replicas = int(variables.get("MEMVAULT_NATS__STREAM_REPLICAS") or 0)
        checks.check(replicas >= 1, f"{file_name}: {component} has no MEMVAULT_NATS__STREAM_REPLICAS")
        if nats_nodes is not None:
            checks.check(
                min(3, nats_nodes) <= replicas <= nats_nodes,
                f"{file_name}: {component} keeps {replicas} stream copies on {nats_nodes} NATS node(s) "
                "(set events.streamReplicas)",
            )
    for job in kinds.get("Job", []):
        if label(job, "app.kubernetes.io/component") == "migrate":
            hook = str(dig(job, ("metadata", "annotations", "helm.sh/hook")) or "")
            checks.check("pre-upgrade" in hook, f"{file_name}: migration Job does not run before upgrades")
    for cluster in kinds.get("Cluster", []):
        # CloudNativePG takes postgresql.conf values as strings only; searches want a sized buffer cache.
        parameters = dig(cluster, ("spec", "postgresql", "parameters")) or {}
        checks.check(
            all(isinstance(value, str) for value in parameters.values()),
            f"{file_name}: the Postgres cluster's parameters must all be strings: {parameters}",
        )
        checks.check("shared_buffers" in parameters, f"{file_name}: the Postgres cluster does not size shared_buffers")


def metric_names(expression: str) -> set[str]:
    """The memvault series an expression queries, without histogram and counter suffixes."""
    names = set()
    for name in re.findall(r"\bmemvault_[a-z_]+", expression):
        for suffix in SERIES_SUFFIXES:
            if name.endswith(suffix) and name[: -len(suffix)] in EXPORTED_METRICS:
                name = name[: -len(suffix)]
        names.add(name)
    return names


def balanced(expression: str) -> bool:
    depth = 0
    for character in expression:
        depth += {"(": 1, ")": -1, "{": 1, "}": -1, "[": 1, "]": -1}.get(character, 0)
        if depth < 0:
            return False
    return depth == 0


def doc_anchors() -> set[str]:
    """GitHub's anchors of docs/operations.md's headings."""
    headings = re.findall(r"^#+ (.+)$", OPERATIONS_DOC.read_text(), re.MULTILINE)
    return {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def check_metrics(
    checks: Checks, file_name: str, kinds: dict[str, list[Manifest]], deployments: dict[str, Manifest]
) -> None:
    """Metrics served on a port of their own by all four services or none; the ServiceMonitor scrapes
    exactly those; alerts and dashboard panels query only series the services export."""
    served: dict[str, dict[str, Any]] = {}
    for component, deployment in deployments.items():
        container = (dig(deployment, ("spec", "template", "spec", "containers")) or [{}])[0]
        ports = {p.get("name"): p.get("containerPort") for p in container.get("ports") or []}
        env = {e.get("name"): e.get("value") for e in container.get("env") or []}
        if "metrics" in ports or "MEMVAULT_METRICS__ENABLED" in env:
            served[component] = {"port": ports.get("metrics"), "env": env}
    monitors = kinds.get("ServiceMonitor", [])
    rules = kinds.get("PrometheusRule", [])
    dashboards = [
        c for c in kinds.get("ConfigMap", []) if "grafana_dashboard" in (dig(c, ("metadata", "labels")) or {})
    ]
    if not served:
        checks.check(not (monitors or rules), f"{file_name}: a ServiceMonitor or PrometheusRule without metrics")
        return
    checks.check(set(served) == set(deployments), f"{file_name}: metrics served by {sorted(served)} only")
    paths = set()
    for component, found in served.items():
        env = found["env"]
        checks.check(env.get("MEMVAULT_METRICS__ENABLED") == "true", f"{file_name}: {component} metrics not enabled")
        checks.check(
            env.get("MEMVAULT_METRICS__PORT") == str(found["port"]),
            f"{file_name}: {component} serves metrics on {env.get('MEMVAULT_METRICS__PORT')}, its port says {found['port']}",
        )
        checks.check(env.get("MEMVAULT_METRICS__HOST") == "0.0.0.0", f"{file_name}: {component} metrics on loopback")
        checks.check(
            found["port"] not in (8080, 8090, 50051, 50052), f"{file_name}: {component} metrics on its own port"
        )
        paths.add(env.get("MEMVAULT_METRICS__PATH"))
    services = {label(s, "app.kubernetes.io/component"): s for s in kinds.get("Service", [])}
    for component in served:
        ports = {p.get("name"): p for p in dig(services.get(component, {}), ("spec", "ports")) or []}
        checks.check(
            ports.get("metrics", {}).get("targetPort") == "metrics",
            f"{file_name}: Service {component} has no metrics port",
        )
    for monitor in monitors:
        name = monitor["metadata"]["name"]
        endpoints = dig(monitor, ("spec", "endpoints")) or []
        checks.check(
            [e.get("port") for e in endpoints] == ["metrics"], f"{file_name}: ServiceMonitor {name} scrapes {endpoints}"
        )
        checks.check(
            {e.get("path") for e in endpoints} <= paths, f"{file_name}: ServiceMonitor {name} scrapes another path"
        )
        selector = dig(monitor, ("spec", "selector")) or {}
        scraped = {c for c, s in services.items() if selects(selector, dig(s, ("metadata", "labels")) or {})}
        checks.check(scraped == set(served), f"{file_name}: ServiceMonitor {name} selects {sorted(scraped)}")
    anchors = doc_anchors()
    for rule in rules:
        alerts = [r for group in dig(rule, ("spec", "groups")) or [] for r in group.get("rules") or []]
        checks.check(
            {a.get("alert") for a in alerts} == ALERTS, f"{file_name}: alerts are {[a.get('alert') for a in alerts]}"
        )
        for alert in alerts:
            where = f"{file_name}: alert {alert.get('alert')}"
            expression = str(alert.get("expr", ""))
            unknown = metric_names(expression) - EXPORTED_METRICS
            checks.check(
                not unknown and bool(metric_names(expression)), f"{where} queries {sorted(unknown) or 'nothing'}"
            )
            checks.check(balanced(expression), f"{where}: unbalanced brackets")
            checks.check(dig(alert, ("labels", "severity")) in ("warning", "critical"), f"{where}: no severity")
            checks.check(bool(alert.get("for")), f"{where}: fires on one sample (no `for`)")
            annotations = alert.get("annotations") or {}
            checks.check(bool(annotations.get("summary") and annotations.get("description")), f"{where}: no summary")
            anchor = str(annotations.get("runbook", "")).partition("#")[2]
            checks.check(anchor in anchors, f"{where}: runbook #{anchor} is no heading of docs/operations.md")
    for config_map in dashboards:
        data = config_map.get("data") or {}
        checks.check(len(data) == 1 and next(iter(data)).endswith(".json"), f"{file_name}: dashboard keys {list(data)}")
        for key, text in data.items():
            try:
                dashboard = json.loads(text)
            except ValueError as error:
                checks.check(False, f"{file_name}: dashboard {key} is not JSON ({error})")
                continue
            checks.check(
                bool(dashboard.get("uid")) and bool(dashboard.get("panels")),
                f"{file_name}: dashboard has no uid or panels",
            )
            ids = [p.get("id") for p in dashboard.get("panels", [])]
            checks.check(len(ids) == len(set(ids)), f"{file_name}: dashboard panel ids repeat")
            for panel in dashboard.get("panels", []):
                for target in panel.get("targets") or []:
                    expression = str(target.get("expr", ""))
                    unknown = metric_names(expression) - EXPORTED_METRICS
                    checks.check(
                        not unknown and bool(metric_names(expression)) and balanced(expression),
                        f"{file_name}: panel {panel.get('title')!r} queries {sorted(unknown) or expression!r}",
                    )


def check_schema(path: str) -> int:
    """values.schema.json closes every object and offers no place for a credential."""
    checks = Checks()
    schema = json.loads(Path(path).read_text())
    passthrough = {"properties.global", "properties.nats", "properties.qdrant"}

    def walk(node: dict[str, Any], where: str) -> None:
        if node.get("type") == "object" and "properties" in node and where not in passthrough:
            checks.check(node.get("additionalProperties") is False, f"{where or 'root'}: accepts unknown keys")
        for name, child in (node.get("properties") or {}).items():
            checks.check(
                not re.search(r"password|passwd|token|apikey|dsn$|^secret$", name, re.IGNORECASE),
                f"{where}.{name}: a value that would put a credential in values",
            )
            walk(child, f"{where}.properties.{name}".lstrip("."))
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            walk(extra, f"{where}.additionalProperties")

    walk(schema, "")
    return checks.report("values.schema.json assertions")


INTERPOLATION = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value: Any, env: dict[str, str], on_missing: Callable[[str], None]) -> Any:
    """Compose-style ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}, $$."""
    if isinstance(value, dict):
        return {key: interpolate(item, env, on_missing) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env, on_missing) for item in value]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        operator, argument = match.group(2), match.group(3) or ""
        current = env.get(name)
        empty = not current
        if operator in (":-", "-"):
            return argument if (current is None or (operator == ":-" and empty)) else str(current)
        if operator in (":?", "?") and (current is None or (operator == ":?" and empty)):
            on_missing(f"{name} ({argument})")
            return ""
        if current is None:
            on_missing(name)
            return ""
        return current

    return INTERPOLATION.sub(replace, value)


def parse_env_file(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    return env


def check_compose(compose_path: str, env_path: str) -> int:
    from compose_spec import PyCompose

    checks = Checks()
    text = Path(compose_path).read_text()
    example = parse_env_file(Path(env_path))
    required = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\?", text))
    referenced = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text))
    # The must-fill secrets are left empty in the example; give them stand-ins of the right shape.
    env = {**example, **{name: "chart-check-" + "x" * 40 for name in required if not example.get(name)}}
    checks.check(all(not example.get(name) for name in required), "a required variable has a value in .env.example")
    checks.check(
        referenced <= set(example),
        f"variables missing from .env.example: {sorted(referenced - set(example))}",
    )
    checks.check(set(example) <= referenced, f".env.example sets unused {sorted(set(example) - referenced)}")

    missing: list[str] = []
    document = interpolate(yaml.safe_load(text), env, missing.append)
    checks.check(not missing, f"unset variables: {missing}")
    try:
        PyCompose.from_json(json.dumps(document)).validate()
    except ValueError as error:
        checks.check(False, f"not a valid Compose file: {error}")
        return checks.report("compose assertions")
    checks.check(True, "valid against the Compose specification")

    services: dict[str, dict[str, Any]] = document["services"]
    for name, service in services.items():
        checks.check(not service.get("ports") or name == "gateway", f"{name} publishes a port; only the gateway may")
        dockerfile = dig(service, ("build", "dockerfile"))
        has_check = "healthcheck" in service or (
            dockerfile is not None and "\nHEALTHCHECK " in Path(dockerfile).read_text()
        )
        checks.check(has_check or name == "migrate", f"{name} has no health check")
        for dependency, condition in (service.get("depends_on") or {}).items():
            checks.check(dependency in services, f"{name} depends on unknown service {dependency}")
            want = "service_completed_successfully" if dependency == "migrate" else "service_healthy"
            checks.check(condition.get("condition") == want, f"{name} waits for {dependency} without {want}")
        if dockerfile is not None:
            checks.check(service.get("read_only") is True, f"{name}: root file system writable")
            checks.check("ALL" in (service.get("cap_drop") or []), f"{name}: capabilities not dropped")
            checks.check(
                "no-new-privileges:true" in (service.get("security_opt") or []), f"{name}: may gain privileges"
            )
        for variable in service.get("environment") or {}:
            if SECRET_NAME.search(variable):
                raw = re.search(rf"^\s+{variable}:\s*(\S+)", text, re.MULTILINE)
                checks.check(
                    raw is not None and raw.group(1).startswith(("$", "*")),
                    f"{name}: {variable} is written into the compose file instead of .env",
                )
    for password in re.findall(r"://[^/@\s:]+:([^@\s]+)@", text):
        checks.check(password.startswith("${"), f"a URL in the compose file carries a literal password {password!r}")
    checks.check(
        dig(services, ("vault", "depends_on", "migrate", "condition")) == "service_completed_successfully",
        "vault does not wait for the migrations",
    )
    return checks.report(f"compose assertions ({len(services)} services)")


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "rendered":
        return check_rendered(argv[1:])
    if len(argv) >= 3 and argv[0] == "commands":
        return check_commands(argv[1], argv[2:])
    if len(argv) == 2 and argv[0] == "schema":
        return check_schema(argv[1])
    if len(argv) == 3 and argv[0] == "compose":
        return check_compose(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
