{{/*
keymount.name: the chart's name, or nameOverride.
*/}}
{{- define "keymount.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
keymount.fullname: fullnameOverride, else the release name when it contains
the chart's name, else <release>-<name>.
*/}}
{{- define "keymount.fullname" -}}
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

{{/*
keymount.labels: the labels of every object.
*/}}
{{- define "keymount.labels" -}}
{{- include "keymount.componentLabels" (dict "root" . "name" (include "keymount.name" .)) -}}
{{- end -}}

{{/*
keymount.componentLabels: the labels of an object of a component with its
own app.kubernetes.io/name (a provider). Call with (dict "root" $ "name" N).
*/}}
{{- define "keymount.componentLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: keymount
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
keymount.selectorLabels: the node DaemonSet's selector, the kustomize
base's (immutable: never change it). A cluster runs one keymount (one
CSIDriver, one socket path), so the release is not part of it, and
`helm install --take-ownership` can adopt what `kubectl apply -k deploy/`
created.
*/}}
{{- define "keymount.selectorLabels" -}}
app.kubernetes.io/name: {{ include "keymount.name" . }}
app.kubernetes.io/component: node
{{- end -}}

{{/*
keymount.serviceAccountName: the driver's ServiceAccount.
*/}}
{{- define "keymount.serviceAccountName" -}}
{{- default (include "keymount.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/*
keymount.image: repository[:tag][@digest] of an image value (dict with
repository, tag, digest); the tag defaults to the chart's appVersion.
Call with (dict "image" .Values.x.image "root" $).
*/}}
{{- define "keymount.image" -}}
{{- $tag := default .root.Chart.AppVersion .image.tag -}}
{{- if .image.digest -}}
{{- printf "%s:%s@%s" .image.repository $tag .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
keymount.driverImage: the driver's image. An upstream values file names
upstream's driver (registry.k8s.io/csi-secrets-store/driver, or a mirror of
it: any repository ending in csi-secrets-store/driver) with upstream's tag:
that image is replaced by keymount's release image with the chart's tag, so
the file installs keymount.
*/}}
{{- define "keymount.driverImage" -}}
{{- $image := .Values.linux.image -}}
{{- if regexMatch "(^|/)csi-secrets-store/driver$" (toString $image.repository) -}}
{{- $image = dict "repository" "ghcr.io/keymount/keymount-driver" "tag" "" "digest" "" -}}
{{- end -}}
{{- include "keymount.image" (dict "image" $image "root" .) -}}
{{- end -}}

{{/*
keymount.metricsPort: the port of linux.metricsAddr (":8095" gives 8095);
empty when metrics are off.
*/}}
{{- define "keymount.metricsPort" -}}
{{- with .Values.linux.metricsAddr -}}
{{- regexReplaceAll "^.*:" (toString .) "" -}}
{{- end -}}
{{- end -}}

{{/*
keymount.providerAudiences: the token audiences of keymount's enabled
providers (providers.aws, providers.vault: their tokenAudiences), a JSON
list.
*/}}
{{- define "keymount.providerAudiences" -}}
{{- $out := list -}}
{{- range $p := list "aws" "vault" -}}
{{- $v := index $.Values.providers $p -}}
{{- if $v.enabled -}}
{{- $out = concat $out $v.tokenAudiences -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
keymount.tokenRequests: tokenRequests, plus the enabled providers'
audiences not already there (the API server refuses an audience listed
twice). A YAML list, or nothing.
*/}}
{{- define "keymount.tokenRequests" -}}
{{- $requests := list -}}
{{- $seen := dict -}}
{{- range .Values.tokenRequests -}}
{{- $requests = append $requests . -}}
{{- $_ := set $seen (toString .audience) true -}}
{{- end -}}
{{- range (include "keymount.providerAudiences" . | fromJsonArray) -}}
{{- if not (hasKey $seen .) -}}
{{- $requests = append $requests (dict "audience" .) -}}
{{- $_ := set $seen . true -}}
{{- end -}}
{{- end -}}
{{- with $requests -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}

{{/*
keymount.podScheduling: nodeSelector (kubernetes.io/os: linux plus the
given one), tolerations, affinity and priorityClassName of a pod spec.
Call with a dict of the component's values.
*/}}
{{- define "keymount.podScheduling" -}}
nodeSelector:
{{- toYaml (merge (dict "kubernetes.io/os" "linux") (default (dict) .nodeSelector)) | nindent 2 }}
{{- with .tolerations }}
tolerations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/*
keymount.controllerName: keymount-controller's objects, <fullname>-controller
(its ServiceAccount is the one the guard rails bind).
*/}}
{{- define "keymount.controllerName" -}}
{{- printf "%s-controller" (include "keymount.fullname" .) -}}
{{- end -}}

{{/*
keymount.controllerAudiences: the audiences of keymount-controller's
--token-request-audience, comma-separated: controller.tokenRequestAudiences
({audience: NAME} or NAME) and the enabled providers' (providers.aws,
providers.vault), each once. Empty: no tokens.
*/}}
{{- define "keymount.controllerAudiences" -}}
{{- $out := list -}}
{{- $requested := concat .Values.controller.tokenRequestAudiences (include "keymount.providerAudiences" . | fromJsonArray) -}}
{{- range $requested -}}
{{- $a := . -}}
{{- if kindIs "map" . -}}
{{- $a = .audience -}}
{{- end -}}
{{- if and $a (not (has (toString $a) $out)) -}}
{{- $out = append $out (toString $a) -}}
{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/*
keymount.controllerContainerSecurity: the securityContext of every
container keymount puts in keymount-controller's pod: its images run as
65532, nothing to write outside the provider volume, no capability.
*/}}
{{- define "keymount.controllerContainerSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}
