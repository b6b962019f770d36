{{- define "poolboy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "poolboy.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- include "poolboy.name" . -}}
{{- end -}}
{{- end -}}

{{- define "poolboy.namespaceName" -}}
{{- default (include "poolboy.name" .) .Values.namespace.name -}}
{{- end -}}

{{- define "poolboy.operatorDomain" -}}
{{- if .Values.operatorDomain.name -}}
{{- .Values.operatorDomain.name -}}
{{- else if .Values.operatorDomain.generate -}}
{{- printf "%s.gpte.redhat.com" (include "poolboy.name" .) -}}
{{- else -}}
default
{{- end -}}
{{- end -}}

{{- define "poolboy.webhookServiceName" -}}
{{- printf "%s-webhook" (include "poolboy.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "poolboy.webhookSecretName" -}}
{{- printf "%s-webhook-tls" (include "poolboy.fullname" .) | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{- define "poolboy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "poolboy.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "poolboy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "poolboy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "poolboy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{ include "poolboy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "poolboy.image" -}}
{{- if eq .Values.image.tagOverride "-" -}}
{{- .Values.image.repository -}}
{{- else if .Values.image.tagOverride -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tagOverride -}}
{{- else -}}
{{- printf "%s:v%s" .Values.image.repository .Chart.AppVersion -}}
{{- end -}}
{{- end -}}

{{/* The operator's rules for claims (cluster-wide, or in the operator namespace when namespaced). */}}
{{- define "poolboy.claimRules" -}}
{{- $domain := include "poolboy.operatorDomain" . -}}
- apiGroups: [{{ $domain | quote }}]
  resources: [resourceclaims]
  verbs: [delete, get, list, patch, watch]
- apiGroups: [{{ $domain | quote }}]
  resources: [resourceclaims/status]
  verbs: [patch]
# A claim's requester is read from the annotations of the claim's namespace.
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get]
# Lifespan and binding events about claims, handles and pools.
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

