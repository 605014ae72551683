{{/*
keymount.providerProbes: the livenessProbe and readinessProbe of one
keymount provider container (a DaemonSet's or a controller sidecar), at the
container's indentation, or nothing when providers.probes.enabled is off.
Both run the provider binary itself (the images hold no shell) with --probe:
it asks gRPC's health check on the socket of the container's own
--provider-dir and name, and fails when the provider does not answer within
--probe-timeout. A provider that hangs (deadlocked, frozen) fails them:
kubelet restarts it and the driver reconnects to its new socket.

Takes a dict: "root" ($), "binary" (its path in the image), "dir" (the
--provider-dir of the container), "name" (its --name, or "" for the
binary's default) and "extraArgs" (the provider's extraArgs, given to the
probe too: a --name, -endpoint or --provider-volume there moves the socket).
*/}}
{{- define "keymount.providerProbes" -}}
{{- $p := .root.Values.providers.probes -}}
{{- if $p.enabled -}}
{{- $cmd := list .binary "--probe" (printf "--probe-timeout=%ds" (int (sub (int $p.timeoutSeconds) 1))) (printf "--provider-dir=%s" .dir) -}}
{{- with .name }}{{ $cmd = append $cmd (printf "--name=%s" .) }}{{ end -}}
{{- range .extraArgs }}{{ $cmd = append $cmd (toString .) }}{{ end -}}
livenessProbe:
  exec:
    command:
      {{- toYaml $cmd | nindent 6 }}
  periodSeconds: {{ $p.periodSeconds }}
  timeoutSeconds: {{ $p.timeoutSeconds }}
  failureThreshold: {{ $p.livenessFailureThreshold }}
  # A hung provider does not stop on SIGTERM: kill it soon.
  terminationGracePeriodSeconds: {{ $p.livenessTerminationGracePeriodSeconds }}
readinessProbe:
  exec:
    command:
      {{- toYaml $cmd | nindent 6 }}
  periodSeconds: {{ $p.periodSeconds }}
  timeoutSeconds: {{ $p.timeoutSeconds }}
  failureThreshold: {{ $p.readinessFailureThreshold }}
{{- end -}}
{{- end -}}
