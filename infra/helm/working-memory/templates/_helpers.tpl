{{/* The name of a service's resources: <release>-<service>. */}}
{{- define "wm.name" -}}
{{- printf "%s-%s" .root.Release.Name .service | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "wm.selectorLabels" -}}
app.kubernetes.io/name: working-memory
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .service }}
{{- end -}}

{{- define "wm.labels" -}}
{{ include "wm.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* NATS_URL: the bundled cluster's client Service (named as the NATS chart names it), or externalNats.url. */}}
{{- define "wm.natsUrl" -}}
{{- if .Values.nats.enabled -}}
{{- $name := .Values.nats.fullnameOverride | default (ternary .Release.Name (printf "%s-nats" .Release.Name) (contains "nats" .Release.Name)) -}}
{{- printf "nats://%s:4222" $name -}}
{{- else -}}
{{- required "externalNats.url is required when nats.enabled is false" .Values.externalNats.url -}}
{{- end -}}
{{- end -}}

{{/* QDRANT_URL: the bundled Qdrant's Service (named as Qdrant's chart names it), or externalQdrant.url. */}}
{{- define "wm.qdrantUrl" -}}
{{- if .Values.qdrant.enabled -}}
{{- $name := .Values.qdrant.fullnameOverride | default (ternary .Release.Name (printf "%s-qdrant" .Release.Name) (contains "qdrant" .Release.Name)) -}}
{{- printf "http://%s:6333" $name -}}
{{- else -}}
{{- required "externalQdrant.url is required when qdrant.enabled is false" .Values.externalQdrant.url -}}
{{- end -}}
{{- end -}}
