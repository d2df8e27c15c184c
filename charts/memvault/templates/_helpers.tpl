{{/* Names and labels. */}}

{{- define "memvault.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "memvault.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of one component's resources: (dict "root" $ "component" "vault") */}}
{{- define "memvault.componentName" -}}
{{- printf "%s-%s" (include "memvault.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "memvault.selectorLabels" -}}
app.kubernetes.io/name: {{ include "memvault.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "memvault.labels" -}}
{{ include "memvault.selectorLabels" . }}
app.kubernetes.io/part-of: memvault
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "memvault.image" -}}
{{- $component := index .root.Values .component -}}
{{- printf "%s/%s:%s" (trimSuffix "/" .root.Values.image.registry) $component.image.repository (default .root.Chart.AppVersion .root.Values.image.tag) }}
{{- end }}

{{/* Pod Security Standard "restricted": the images run as uid/gid 10001. */}}
{{- define "memvault.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "memvault.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Everything a pod shares: no API token, pull secrets. */}}
{{- define "memvault.podCommon" -}}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- include "memvault.podSecurityContext" . | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
{{- end }}
{{- end }}

{{/* Where one component's pods may run: (dict "root" $ "component" "gateway") */}}
{{- define "memvault.placement" -}}
{{- $c := index .root.Values .component -}}
{{- with $c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Placement plus a soft spread of replicas over nodes, for the Deployments. */}}
{{- define "memvault.scheduling" -}}
{{- include "memvault.placement" . }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "memvault.selectorLabels" . | nindent 8 }}
{{- end }}

{{/* /tmp is the only writable path; the root file system is read-only. */}}
{{- define "memvault.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{- define "memvault.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* Addresses and where credentials come from. */}}

{{- define "memvault.gatewayPublicUrl" -}}
{{- trimSuffix "/" .Values.gateway.publicUrl }}
{{- end }}

{{- define "memvault.gatewayHost" -}}
{{- (urlParse .Values.gateway.publicUrl).hostname }}
{{- end }}

{{/* Service name the upstream chart of a dependency gets: (dict "root" $ "chart" "nats") */}}
{{- define "memvault.dependencyFullname" -}}
{{- $values := index .root.Values .chart -}}
{{- if $values.fullnameOverride }}
{{- $values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains .chart .root.Release.Name }}
{{- .root.Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .root.Release.Name .chart | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "memvault.postgresClusterName" -}}
{{- include "memvault.componentName" (dict "root" . "component" "postgres") }}
{{- end }}

{{- define "memvault.identitySecretName" -}}
{{- default (include "memvault.componentName" (dict "root" . "component" "identity")) .Values.identity.existingSecret }}
{{- end }}

{{- define "memvault.env.identity" -}}
- name: MEMVAULT_IDENTITY__SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "memvault.identitySecretName" . }}
      key: {{ .Values.identity.existingSecretKey }}
{{- end }}

{{/* CloudNativePG writes <cluster>-app with a ready-made `uri`. */}}
{{- define "memvault.env.postgres" -}}
- name: MEMVAULT_POSTGRES__DSN
  valueFrom:
    secretKeyRef:
      {{- if .Values.postgresql.cloudnativepg.enabled }}
      name: {{ include "memvault.postgresClusterName" . }}-app
      key: uri
      {{- else }}
      name: {{ .Values.externalPostgres.existingSecret }}
      key: {{ .Values.externalPostgres.existingSecretKey }}
      {{- end }}
{{- end }}

{{- define "memvault.env.nats" -}}
- name: MEMVAULT_NATS__URL
{{- if .Values.nats.enabled }}
  value: {{ printf "nats://%s:4222" (include "memvault.dependencyFullname" (dict "root" . "chart" "nats")) | quote }}
{{- else if .Values.externalNats.existingSecret }}
  valueFrom:
    secretKeyRef:
      name: {{ .Values.externalNats.existingSecret }}
      key: {{ .Values.externalNats.existingSecretKey }}
{{- else }}
  value: {{ .Values.externalNats.url | quote }}
{{- end }}
- name: MEMVAULT_NATS__STREAM_REPLICAS
  value: {{ .Values.events.streamReplicas | quote }}
{{- end }}

{{- define "memvault.qdrantUrl" -}}
{{- if .Values.qdrant.enabled }}
{{- printf "http://%s:6333" (include "memvault.dependencyFullname" (dict "root" . "chart" "qdrant")) }}
{{- else }}
{{- .Values.externalQdrant.url }}
{{- end }}
{{- end }}

{{/* Shared by every container: log level and tracing. (dict "root" $ "component" "vault") */}}
{{- define "memvault.env.common" -}}
- name: MEMVAULT_LOG__LEVEL
  value: {{ .root.Values.log.level | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "memvault-%s" .component | quote }}
{{- with .root.Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- end }}

{{/* Environment of the vault image, shared by the Deployment, the CronJobs and nothing else. */}}
{{- define "memvault.env.vault" -}}
- name: MEMVAULT_VAULT__LISTEN
  value: "0.0.0.0:50051"
- name: MEMVAULT_VAULT__INDEXER_ADDRESS
  value: {{ printf "%s:50052" (include "memvault.componentName" (dict "root" . "component" "indexer")) | quote }}
{{ include "memvault.env.postgres" . }}
{{ include "memvault.env.nats" . }}
{{ include "memvault.env.identity" . }}
{{ include "memvault.env.sources" . }}
{{- end }}

{{/* Tracked sources: the mounted roots, the URL rules, and whether the vault's own loop runs. */}}
{{- define "memvault.env.sources" -}}
{{- $roots := list }}
{{- range .Values.sources.fileRoots }}{{ $roots = append $roots .mountPath }}{{ end }}
- name: MEMVAULT_SOURCES__FILE_ROOTS
  value: {{ toJson $roots | quote }}
- name: MEMVAULT_SOURCES__URL_HOSTS
  value: {{ toJson .Values.sources.urlHosts | quote }}
- name: MEMVAULT_SOURCES__PRIVATE_NETWORKS
  value: {{ toJson .Values.sources.privateNetworks | quote }}
- name: MEMVAULT_SOURCES__CHECK_INTERVAL_SECONDS
  value: {{ ternary 0 .Values.sources.checkIntervalSeconds .Values.sources.cronJob.enabled | quote }}
{{- end }}

{{- define "memvault.sources.mounts" -}}
{{- range .Values.sources.fileRoots }}
- name: {{ printf "source-%s" .name }}
  mountPath: {{ .mountPath }}
  readOnly: true
{{- end }}
{{- end }}

{{- define "memvault.sources.volumes" -}}
{{- range .Values.sources.fileRoots }}
- name: {{ printf "source-%s" .name }}
  {{- if .configMap }}
  configMap:
    name: {{ .configMap }}
  {{- else if .persistentVolumeClaim }}
  persistentVolumeClaim:
    claimName: {{ .persistentVolumeClaim }}
    readOnly: true
  {{- else }}
  hostPath:
    path: {{ .hostPath }}
    type: Directory
  {{- end }}
{{- end }}
{{- end }}

{{- define "memvault.env.indexer" -}}
- name: MEMVAULT_INDEXER__LISTEN
  value: "0.0.0.0:50052"
- name: MEMVAULT_INDEXER__ADDRESS
  value: {{ printf "%s:50052" (include "memvault.componentName" (dict "root" . "component" "indexer")) | quote }}
- name: MEMVAULT_INDEXER__VAULT_ADDRESS
  value: {{ printf "%s:50051" (include "memvault.componentName" (dict "root" . "component" "vault")) | quote }}
- name: MEMVAULT_QDRANT__URL
  value: {{ include "memvault.qdrantUrl" . | quote }}
{{ include "memvault.env.nats" . }}
{{ include "memvault.env.identity" . }}
{{- end }}

{{/* Non-empty when a maintenance CronJob runs `retention` (then the vault's in-process loop is off). */}}
{{- define "memvault.retentionCronJob" -}}
{{- range $name, $job := .Values.maintenance.cronJobs }}
{{- if and (eq $job.component "vault") (eq (first $job.args) "retention") (not $job.suspend) }}{{ $name }}{{ end }}
{{- end }}
{{- end }}

{{/* Configuration the schema cannot express; fails with the value to set. */}}
{{- define "memvault.validate" -}}
{{- if not .Values.gateway.publicUrl }}
{{- fail "set gateway.publicUrl to the https URL agents will use, e.g. --set gateway.publicUrl=https://memvault.example.com" }}
{{- end }}
{{- if and (not .Values.postgresql.cloudnativepg.enabled) (not .Values.externalPostgres.existingSecret) }}
{{- fail "no database: enable postgresql.cloudnativepg or set externalPostgres.existingSecret to a Secret holding the DSN" }}
{{- end }}
{{- if and (not .Values.nats.enabled) (not .Values.externalNats.url) (not .Values.externalNats.existingSecret) }}
{{- fail "no NATS: enable nats or set externalNats.url (or externalNats.existingSecret)" }}
{{- end }}
{{- if and (not .Values.qdrant.enabled) (not .Values.externalQdrant.url) }}
{{- fail "no Qdrant: enable qdrant or set externalQdrant.url" }}
{{- end }}
{{- if and .Values.httpRoute.enabled (not .Values.httpRoute.parentRefs) }}
{{- fail "httpRoute.enabled needs httpRoute.parentRefs (the Gateway to attach to)" }}
{{- end }}
{{- $m := .Values.metrics }}
{{- if and (or $m.serviceMonitor.enabled $m.prometheusRule.enabled) (not $m.enabled) }}
{{- fail "metrics.serviceMonitor and metrics.prometheusRule need metrics.enabled=true (the services serve nothing to scrape otherwise)" }}
{{- end }}
{{- if has (int $m.port) (list 8080 8090 50051 50052) }}
{{- fail (printf "metrics.port %d is a service's own port (8080, 8090, 50051, 50052); choose another, e.g. 9464" (int $m.port)) }}
{{- end }}
{{- /* The maintenance commands a CronJob may run, by image: `make chart-check` checks them against each
     image's `--help` (scripts/chart_check.py, which lists the commands never scheduled). */}}
{{- $commands := dict "vault" (list "migrate" "retention" "backup" "sources" "archive") "indexer" (list "reconcile" "reindex" "reembed") }}
{{- range $name, $job := .Values.maintenance.cronJobs }}
{{- $available := get $commands $job.component }}
{{- if not (has (first $job.args) $available) }}
{{- fail (printf "maintenance.cronJobs.%s: %q is not a maintenance command of memvault-%s (available: %s)" $name (first $job.args) $job.component (join ", " $available | default "none")) }}
{{- end }}
{{- end }}
{{- end }}

{{/* Prometheus metrics (docs/operations.md, "Metrics and alerts"): the settings each service
reads, and its `metrics` port on the container and the Service. Never the gateway's public port. */}}
{{- define "memvault.env.metrics" -}}
{{- if .Values.metrics.enabled }}
- name: MEMVAULT_METRICS__ENABLED
  value: "true"
- name: MEMVAULT_METRICS__HOST
  value: "0.0.0.0"
- name: MEMVAULT_METRICS__PORT
  value: {{ .Values.metrics.port | quote }}
- name: MEMVAULT_METRICS__PATH
  value: {{ .Values.metrics.path | quote }}
{{- end }}
{{- end }}

{{- define "memvault.metrics.containerPort" -}}
{{- if .Values.metrics.enabled }}
- name: metrics
  containerPort: {{ .Values.metrics.port }}
  protocol: TCP
{{- end }}
{{- end }}

{{- define "memvault.metrics.servicePort" -}}
{{- if .Values.metrics.enabled }}
- name: metrics
  port: {{ .Values.metrics.port }}
  targetPort: metrics
  protocol: TCP
{{- end }}
{{- end }}
