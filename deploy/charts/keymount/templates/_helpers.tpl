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
keymount.driverImage: the driver's image. linux.image.repository is never
swapped for an image on another registry: upstream's own default
(registry.k8s.io/csi-secrets-store/driver, or k8s.gcr.io/... of older
values files) means "the release's driver" and gives keymount's release
image with the chart's tag (the notes say so); any other repository ending
in csi-secrets-store/driver (a mirror of upstream's image, which cannot run
as keymount) fails the render, naming the value to set.
*/}}
{{- define "keymount.driverImage" -}}
{{- $image := .Values.linux.image -}}
{{- $repo := toString $image.repository -}}
{{- if has $repo (list "registry.k8s.io/csi-secrets-store/driver" "k8s.gcr.io/csi-secrets-store/driver") -}}
{{- $image = dict "repository" "ghcr.io/keymount/keymount-driver" "tag" "" "digest" "" -}}
{{- else if regexMatch "(^|/)csi-secrets-store/driver$" $repo -}}
{{- fail (printf "linux.image.repository is %q, upstream's driver image (a mirror of it): keymount cannot run it and will not swap it for an image on another registry. Set linux.image.repository to the keymount driver image in your registry (e.g. %s/keymount-driver, mirrored from ghcr.io/keymount/keymount-driver) and linux.image.tag to its tag (empty: the chart's appVersion %s)" $repo (dir $repo | dir) .Chart.AppVersion) -}}
{{- end -}}
{{- include "keymount.image" (dict "image" $image "root" .) -}}
{{- end -}}

{{/*
keymount.upstreamDriverImage: "true" when linux.image.repository is
upstream's own default, which keymount.driverImage replaces.
*/}}
{{- define "keymount.upstreamDriverImage" -}}
{{- if has (toString .Values.linux.image.repository) (list "registry.k8s.io/csi-secrets-store/driver" "k8s.gcr.io/csi-secrets-store/driver") -}}true{{- end -}}
{{- end -}}

{{/*
keymount.upstreamValues: "true" when the values are an upstream chart values
file: they carry linux.crds or windows, keys only the upstream chart has.
*/}}
{{- define "keymount.upstreamValues" -}}
{{- if or (hasKey .Values.linux "crds") (hasKey .Values "windows") -}}true{{- end -}}
{{- end -}}

{{/*
keymount.sidecar: "true" when a sidecar runs: its enabled value
(linux.registrar.enabled, linux.livenessProbe.enabled) when set, else
(null, keymount's default) when the values are upstream's, whose chart
always runs both. Call with (dict "enabled" VALUE "root" $).
*/}}
{{- define "keymount.sidecar" -}}
{{- if kindIs "invalid" .enabled -}}
{{- include "keymount.upstreamValues" .root -}}
{{- else if .enabled -}}true{{- end -}}
{{- end -}}

{{/*
keymount.healthPort: the port of the driver's own /healthz and /readyz
(--health-addr): linux.healthPort when set, else upstream's health port
(livenessProbe.port, 9808), or 9809 when the livenessprobe sidecar holds
that one. Call with (dict "root" $ "sidecarProbe" BOOL).
*/}}
{{- define "keymount.healthPort" -}}
{{- $v := .root.Values -}}
{{- if not (kindIs "invalid" $v.linux.healthPort) -}}
{{- int64 $v.linux.healthPort -}}
{{- else if and .sidecarProbe (eq (int64 $v.livenessProbe.port) 9809) -}}
9810
{{- else if .sidecarProbe -}}
9809
{{- else -}}
{{- int64 $v.livenessProbe.port -}}
{{- end -}}
{{- end -}}

{{/*
keymount.nodePodLabels: the labels of the node driver's pods: the
selector's, upstream's chart's (app: secrets-store-csi-driver, or
nameOverride, as upstream's sscd.name; the app.kubernetes.io/* and
helm.sh/chart of every object), commonLabels and linux.podLabels.
*/}}
{{- define "keymount.nodePodLabels" -}}
{{- include "keymount.labels" . }}
app.kubernetes.io/component: node
app: {{ default "secrets-store-csi-driver" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- with .Values.linux.podLabels }}
{{ toYaml . }}
{{- end }}
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

{{/*
keymount.requireAdmissionPolicies: fails the render when the cluster
(.Capabilities.KubeVersion) cannot enforce the ValidatingAdmissionPolicies
(admissionregistration.k8s.io/v1, Kubernetes 1.30+) that bound what the
chart value "value" grants: without them its RBAC would act unbounded, so
the chart refuses rather than install it. Called as
(dict "root" $ "value" "controller.enabled").
*/}}
{{- define "keymount.requireAdmissionPolicies" -}}
{{- $kv := .root.Capabilities.KubeVersion.Version }}
{{- if not (semverCompare ">=1.30.0-0" $kv) }}
{{- fail (printf "%s: its guard rails are ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1, Kubernetes 1.30 or later), which Kubernetes %s cannot enforce; the chart supports Kubernetes %s (Chart.yaml kubeVersion)" .value $kv .root.Chart.KubeVersion) }}
{{- end }}
{{- end }}
