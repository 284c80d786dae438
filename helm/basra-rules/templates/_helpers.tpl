{{/* Chart name, overridable. */}}
{{- define "basra-rules.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object name prefix: the release name, plus the chart name unless the release already holds it. */}}
{{- define "basra-rules.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The headless Service's name; kept within the 63-character DNS label limit. */}}
{{- define "basra-rules.headlessName" -}}
{{- printf "%s-headless" (include "basra-rules.fullname" . | trunc 54 | trimSuffix "-") -}}
{{- end -}}

{{- define "basra-rules.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that never change over a release's life, used in selectors. */}}
{{- define "basra-rules.selectorLabels" -}}
app.kubernetes.io/name: {{ include "basra-rules.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "basra-rules.labels" -}}
helm.sh/chart: {{ include "basra-rules.chart" . }}
{{ include "basra-rules.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: server
app.kubernetes.io/part-of: basra-rules
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "basra-rules.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "basra-rules.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "basra-rules.signingSecretName" -}}
{{- default (printf "%s-signing" (include "basra-rules.fullname" .)) .Values.signing.existingSecret -}}
{{- end -}}

{{- define "basra-rules.clientCASecretName" -}}
{{- default .Values.tls.secretName .Values.tls.clientCA.secretName -}}
{{- end -}}

{{/*
Settings the schema cannot express across keys; failing here stops a release before it reaches
the cluster.
*/}}
{{- define "basra-rules.validate" -}}
{{- $grace := int .Values.server.graceSeconds -}}
{{- $pause := int .Values.lifecycle.preStopSleepSeconds -}}
{{- $budget := int .Values.terminationGracePeriodSeconds -}}
{{- if le $budget (add $grace $pause) -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be greater than server.graceSeconds (%d) + lifecycle.preStopSleepSeconds (%d), or the kubelet kills the server before it drains" $budget $grace $pause) -}}
{{- end -}}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) -}}
{{- fail "autoscaling.minReplicas must not exceed autoscaling.maxReplicas" -}}
{{- end -}}
{{- if .Values.podDisruptionBudget.enabled -}}
{{- $max := .Values.podDisruptionBudget.maxUnavailable -}}
{{- $min := .Values.podDisruptionBudget.minAvailable -}}
{{- if eq (kindIs "invalid" $max) (kindIs "invalid" $min) -}}
{{- fail "podDisruptionBudget: set exactly one of maxUnavailable and minAvailable" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.signing.enabled (not .Values.signing.existingSecret) (not .Values.signing.keys) -}}
{{- fail "signing.enabled needs signing.existingSecret or at least one entry in signing.keys" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) -}}
{{- fail "tls.enabled needs tls.secretName (a kubernetes.io/tls Secret)" -}}
{{- end -}}
{{- if and .Values.tls.clientCA.enabled (not .Values.tls.enabled) -}}
{{- fail "tls.clientCA.enabled needs tls.enabled" -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled (eq (int .Values.server.metricsPort) 0) -}}
{{- fail "serviceMonitor.enabled needs server.metricsPort" -}}
{{- end -}}
{{- if and .Values.http.enabled .Values.tls.enabled -}}
{{- fail "http.enabled needs tls.enabled false: the gateway calls the server in plaintext on the pod's loopback and serves plain HTTP (terminate TLS for HTTP in front of it, e.g. at an ingress)" -}}
{{- end -}}
{{- if and .Values.http.enabled (ge (int .Values.http.drainSeconds) $pause) -}}
{{- fail (printf "http.drainSeconds (%d) must be less than lifecycle.preStopSleepSeconds (%d): the gateway must stop taking requests before the server stops taking calls" (int .Values.http.drainSeconds) $pause) -}}
{{- end -}}
{{- if and .Values.tracing.enabled (not .Values.tracing.endpoint) -}}
{{- fail "tracing.enabled needs tracing.endpoint (the collector's OTLP/gRPC address, http(s)://host:port)" -}}
{{- end -}}
{{- end -}}

{{/* Every container's security context: nothing but what serving needs. */}}
{{- define "basra-rules.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The port of tracing.endpoint (the schema requires one). */}}
{{- define "basra-rules.collectorPort" -}}
{{- regexFind "[0-9]+/?$" .Values.tracing.endpoint | trimSuffix "/" | int -}}
{{- end -}}

{{/*
One probe action: gRPC health on the health port (plaintext whatever tls says); without one,
on the gRPC port when it speaks plaintext, TCP otherwise.
*/}}
{{- define "basra-rules.probeAction" -}}
{{- if .root.Values.server.healthPort -}}
grpc:
  port: {{ .root.Values.server.healthPort }}
  service: {{ .service | quote }}
{{- else if .root.Values.tls.enabled -}}
tcpSocket:
  port: grpc
{{- else -}}
grpc:
  port: {{ .root.Values.server.port }}
  service: {{ .service | quote }}
{{- end -}}
{{- end -}}

{{/* Secret files are group-readable through fsGroup; without one they must be world-readable. */}}
{{- define "basra-rules.secretFileMode" -}}
{{- if .Values.podSecurityContext.fsGroup -}}0440{{- else -}}0444{{- end -}}
{{- end -}}

{{/* The chart-made signing keys in BASRA_SIGNING_KEYS form, order kept (the first signs). */}}
{{- define "basra-rules.signingKeysLine" -}}
{{- $pairs := list -}}
{{- range .Values.signing.keys -}}
{{- $pairs = append $pairs (printf "%s:%s" .id .key) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/*
The Deployment's replicas. Without the autoscaler, replicaCount. With it, the Deployment is
the autoscaler's to size, but a Deployment without replicas starts with one pod, so that
`helm install --wait` would return with fewer pods than minReplicas (and a PodDisruptionBudget
that lets the only pod go) until the autoscaler's first pass. So: minReplicas on install, and
on upgrade the count the autoscaler has set, read from the cluster (at least minReplicas), so
that an upgrade never undoes a scale-up. `helm template` cannot read the cluster: minReplicas.
*/}}
{{- define "basra-rules.replicas" -}}
{{- if not .Values.autoscaling.enabled -}}
{{- .Values.replicaCount -}}
{{- else -}}
{{- $running := lookup "apps/v1" "Deployment" .Release.Namespace (include "basra-rules.fullname" .) -}}
{{- $current := 0 -}}
{{- if $running -}}{{- $current = int (default 0 $running.spec.replicas) -}}{{- end -}}
{{- max $current (int .Values.autoscaling.minReplicas) -}}
{{- end -}}
{{- end -}}
