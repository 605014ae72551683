// Package v1 contains the secrets-store.csi.x-k8s.io/v1 API types:
// SecretProviderClass and SecretProviderClassPodStatus.
//
// Field names and JSON tags follow the upstream Secrets Store CSI Driver's
// CRDs exactly, so existing manifests decode into these types unchanged.
// keymount's extras live in status only: pod status conditions,
// lastRefreshTime and per-object errors. The CRDs' names are upstream's too,
// with no short names (tools parse `kubectl api-resources`) and no status
// subresource; keymount adds printer columns for its status fields.
//
// +kubebuilder:object:generate=true
// +groupName=secrets-store.csi.x-k8s.io
package v1
