{{/* The labels every object carries, and the pods' selector. */}}
{{- define "coordinator.labels" -}}
app.kubernetes.io/name: coordinator
{{- end -}}

{{/* The config file as given: values.config, else the shipped sample. */}}
{{- define "coordinator.baseConfig" -}}
{{- if .Values.config -}}
{{ .Values.config }}
{{- else -}}
{{ .Files.Get "files/coordinator.yaml" }}
{{- end -}}
{{- end -}}

{{/* The config file: the base config, and with control on the control
     section the values make, appended. */}}
{{- define "coordinator.config" -}}
{{ include "coordinator.baseConfig" . }}
{{- if .Values.control.enabled }}
{{- if hasKey (include "coordinator.baseConfig" . | fromYaml) "control" }}
{{- fail "control.enabled: values.config has a control section already; drop it and set control.* in the values" }}
{{- end }}
# control: rendered by the chart from the values' control.*.
{{ include "coordinator.controlConfig" . }}
{{- end -}}
{{- end -}}

{{/* Where the control port's token and TLS Secrets are mounted. */}}
{{- define "coordinator.controlTokenDir" -}}/etc/coordinator/control-token{{- end -}}
{{- define "coordinator.controlTLSDir" -}}/etc/coordinator/control-tls{{- end -}}

{{/* The config's control section, from .Values.control. */}}
{{- define "coordinator.controlConfig" -}}
{{- $c := .Values.control -}}
{{- $ctl := deepCopy ($c.settings | default dict) -}}
{{- range $k := list "listen_addr" "tls" "token_file" "membership" -}}
{{- if hasKey $ctl $k -}}
{{- fail (printf "control.settings.%s: set by the chart from control.* (port, tls, token, membership)" $k) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $ctl "listen_addr" (printf ":%d" (int $c.port)) -}}
{{- if $c.token.existingSecret -}}
{{- $_ := set $ctl "token_file" (printf "%s/token" (include "coordinator.controlTokenDir" .)) -}}
{{- end -}}
{{- if $c.tls.enabled -}}
{{- $dir := include "coordinator.controlTLSDir" . -}}
{{- $tls := dict "cert_file" (printf "%s/tls.crt" $dir) "key_file" (printf "%s/tls.key" $dir) -}}
{{- if $c.tls.clientAuth -}}
{{- $_ := set $tls "client_ca_file" (printf "%s/ca.crt" $dir) -}}
{{- $_ := set $tls "client_auth" $c.tls.clientAuth -}}
{{- end -}}
{{- $_ := set $ctl "tls" $tls -}}
{{- end -}}
{{- $dns := list -}}
{{- range $c.membership.dns -}}
{{- $dns = append $dns (dict "role" .role "name" .name "port" (int .port)) -}}
{{- end -}}
{{- range $c.headlessServices -}}
{{- $dns = append $dns (dict "role" .role "name" (printf "%s.%s.svc" .name $.Release.Namespace) "port" (int .port)) -}}
{{- end -}}
{{- $m := dict "refresh_interval" $c.membership.refreshInterval -}}
{{- if $dns -}}{{- $_ := set $m "dns" $dns -}}{{- end -}}
{{- if $c.membership.static -}}{{- $_ := set $m "static" $c.membership.static -}}{{- end -}}
{{- if not (or $dns $c.membership.static) -}}
{{- fail "control.enabled: no engines; set control.membership.dns, control.membership.static or control.headlessServices" -}}
{{- end -}}
{{- $_ := set $ctl "membership" $m -}}
{{- dict "control" $ctl | toYaml -}}
{{- end -}}

{{/* The config ConfigMap's name: a new name for each config, as kustomize's
     generator, so that a config change rolls the pods and a rollback finds
     the previous config. */}}
{{- define "coordinator.configName" -}}
coordinator-config-{{ include "coordinator.config" . | sha256sum | trunc 10 }}
{{- end -}}
