{{/* The release's name for its objects, at most 63 characters (a DNS label). */}}
{{- define "delayd.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the pods (never change them on an upgrade). */}}
{{- define "delayd.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "delayd.labels" -}}
{{ include "delayd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Secret mounted as files: an existing one, the one the chart creates, or none (""). */}}
{{- define "delayd.secretName" -}}
{{- if .Values.secret.existingSecret -}}
{{- .Values.secret.existingSecret -}}
{{- else if .Values.secret.create -}}
{{- include "delayd.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* Where the Secret's files are mounted. */}}
{{- define "delayd.secretDir" -}}/etc/delayd/secrets{{- end -}}

{{/* The environment variable of a setting: DELAYD_ + the name upper-cased, '.' as '_'. */}}
{{- define "delayd.envName" -}}
{{- printf "DELAYD_%s" (. | upper | replace "." "_") -}}
{{- end -}}
