{{/*
keymount.controllerProviders: the provider containers of keymount-controller's
pod (a YAML list, or nothing): keymount's own enabled providers as sidecars
(controller.keymountProviders), each serving its socket in the volume
providervol, with the values of its DaemonSet; then controller.providerContainer
as given (the sync controller chart's value).
*/}}
{{- define "keymount.controllerProviders" -}}
{{- $c := .Values.controller -}}
{{- if $c.keymountProviders -}}
{{- with .Values.providers.local -}}
{{- if .enabled }}
- name: provider-local
  image: {{ include "keymount.image" (dict "image" .image "root" $) | quote }}
  imagePullPolicy: {{ .image.pullPolicy }}
  command: [/usr/local/bin/keymount-provider-local]
  args:
    - --provider-dir={{ $c.providerVolume }}
    - --name={{ .name }}
    - --root=/secrets
    {{- with .allowedNamespaces }}
    - --allowed-namespaces={{ join "," . }}
    {{- end }}
    {{- range .extraArgs }}
    - {{ . | quote }}
    {{- end }}
  {{- with .env }}
  env:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- include "keymount.controllerContainerSecurity" $ | nindent 4 }}
  {{- include "keymount.providerProbes" (dict "root" $ "binary" "/usr/local/bin/keymount-provider-local" "dir" $c.providerVolume "name" .name "extraArgs" .extraArgs) | nindent 2 }}
  {{- with .resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: providervol
      mountPath: {{ $c.providerVolume }}
    - name: provider-local-files
      mountPath: /secrets
      readOnly: true
{{- end }}
{{- end }}
{{- with .Values.providers.aws -}}
{{- if .enabled }}
- name: provider-aws
  image: {{ include "keymount.image" (dict "image" .image "root" $) | quote }}
  imagePullPolicy: {{ .image.pullPolicy }}
  command: [/usr/local/bin/keymount-provider-aws]
  args:
    - --provider-dir={{ $c.providerVolume }}
    - --qps={{ .qps }}
    - --burst={{ .burst }}
    {{- with .region }}
    - --region={{ . }}
    {{- end }}
    {{- with .metricsAddr }}
    - --metrics-addr={{ . }}
    {{- end }}
    {{- range .extraArgs }}
    - {{ . | quote }}
    {{- end }}
  {{- with .metricsAddr }}
  ports:
    - name: aws-metrics
      containerPort: {{ regexReplaceAll "^.*:" (toString .) "" }}
  {{- end }}
  env:
    # A class without parameters.region reads the region label of the
    # controller's node.
    - name: NODE_NAME
      valueFrom:
        fieldRef:
          fieldPath: spec.nodeName
    {{- with .goMemLimit }}
    - name: GOMEMLIMIT
      value: {{ . | quote }}
    {{- end }}
    {{- with .env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  securityContext:
    {{- include "keymount.controllerContainerSecurity" $ | nindent 4 }}
  {{- include "keymount.providerProbes" (dict "root" $ "binary" "/usr/local/bin/keymount-provider-aws" "dir" $c.providerVolume "name" "" "extraArgs" .extraArgs) | nindent 2 }}
  {{- with .resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: providervol
      mountPath: {{ $c.providerVolume }}
    # It reads ServiceAccounts and nodes, and proves tokens, as its own
    # ServiceAccount (<controller>-provider-aws), never the controller's.
    - name: provider-aws-api-access
      mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      readOnly: true
{{- end }}
{{- end }}
{{- with .Values.providers.vault -}}
{{- if .enabled }}
- name: provider-vault
  image: {{ include "keymount.image" (dict "image" .image "root" $) | quote }}
  imagePullPolicy: {{ .image.pullPolicy }}
  command: [/usr/local/bin/keymount-provider-vault]
  args:
    - --provider-dir={{ $c.providerVolume }}
    {{- with .metricsAddr }}
    - --metrics-addr={{ . }}
    {{- end }}
    {{- range .extraArgs }}
    - {{ . | quote }}
    {{- end }}
  {{- with .metricsAddr }}
  ports:
    - name: vault-metrics
      containerPort: {{ regexReplaceAll "^.*:" (toString .) "" }}
  {{- end }}
  {{- if or .goMemLimit .env }}
  env:
    {{- with .goMemLimit }}
    - name: GOMEMLIMIT
      value: {{ . | quote }}
    {{- end }}
    {{- with .env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  securityContext:
    {{- include "keymount.controllerContainerSecurity" $ | nindent 4 }}
  {{- include "keymount.providerProbes" (dict "root" $ "binary" "/usr/local/bin/keymount-provider-vault" "dir" $c.providerVolume "name" "" "extraArgs" .extraArgs) | nindent 2 }}
  {{- with .resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: providervol
      mountPath: {{ $c.providerVolume }}
    # It proves SecretSyncs' tokens as its own ServiceAccount
    # (<controller>-provider-vault), never the controller's.
    - name: provider-vault-api-access
      mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      readOnly: true
    {{- with .volumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- with $c.providerContainer }}
{{ toYaml . }}
{{- end }}
{{- end -}}
