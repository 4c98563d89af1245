{{/* The labels every object carries, and the pods' selector. */}}
{{- define "coordinator.labels" -}}
app.kubernetes.io/name: coordinator
{{- end -}}

{{/* The config file: values.config, else the shipped sample. */}}
{{- define "coordinator.config" -}}
{{- if .Values.config -}}
{{ .Values.config }}
{{- else -}}
{{ .Files.Get "files/coordinator.yaml" }}
{{- end -}}
{{- end -}}

{{/* The config ConfigMap's name: a new name for each config, as kustomize's
     generator, so that a config change rolls the pods and a rollback finds
     the previous config. */}}
{{- define "coordinator.configName" -}}
coordinator-config-{{ include "coordinator.config" . | sha256sum | trunc 10 }}
{{- end -}}
