{{/*
keymount.valueNotes: the install notes (NOTES.txt) of values that need
another which is off, naming both, so that nothing is silently left out.
Notes, not failures: switching a component off (controller.enabled=false,
linux.enabled=false) is a choice of its own, and the values that depend on
it stay as the user left them, with no effect until it is back on.

  restartOnChange.enabled     needs controller.enabled: keymount-controller does the restarts
  controller.fanout.enabled   needs controller.enabled: keymount-controller writes the copies
  controller.enabled          needs a provider beside it (providers.<name>.enabled with
                              controller.keymountProviders, or controller.providerContainer)
  rotationPollInterval        needs enableSecretRotation
  syncSecret.enabled, enableSecretRotation
                              need linux.enabled: the node driver does them
*/}}
{{- define "keymount.valueNotes" -}}
{{- $controller := .Values.controller | default dict -}}
{{- if and (.Values.restartOnChange | default dict).enabled (not $controller.enabled) }}

NOTE: restartOnChange.enabled has no effect while controller.enabled is off:
keymount-controller restarts the workloads, and it is not installed. Set
controller.enabled=true to restart workloads on change.
{{- end }}
{{- if and ($controller.fanout | default dict).enabled (not $controller.enabled) }}

NOTE: controller.fanout.enabled has no effect while controller.enabled is off:
keymount-controller copies the Secrets and ConfigMaps, and it is not
installed. Set controller.enabled=true to copy them.
{{- end }}
{{- if and $controller.enabled (not (include "keymount.controllerProviders" .)) }}

NOTE: controller.enabled is on, but no provider runs beside keymount-controller:
enable providers.local.enabled, providers.aws.enabled or
providers.vault.enabled (with controller.keymountProviders, the default), or
add one with controller.providerContainer. Until then every SecretSync fails
with its provider not found.
{{- end }}
{{- if and .Values.rotationPollInterval (not .Values.enableSecretRotation) }}

NOTE: rotationPollInterval ({{ .Values.rotationPollInterval }}) has no effect while
enableSecretRotation is off: mounted volumes keep what their first publish
mounted. Set enableSecretRotation=true to refresh them.
{{- end }}
{{- if and (not .Values.linux.enabled) (or (.Values.syncSecret | default dict).enabled .Values.enableSecretRotation) }}

NOTE: syncSecret.enabled and enableSecretRotation have no effect while
linux.enabled is off: the node driver does them, and it is not installed.
{{- end }}
{{- end -}}
