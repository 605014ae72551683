// Package v1 contains the secrets-store.csi.x-k8s.io/v1 API types:
// SecretProviderClass and (later) SecretProviderClassPodStatus.
//
// Field names and JSON tags follow the upstream Secrets Store CSI Driver's
// CRDs exactly, so an existing SecretProviderClass manifest decodes into
// these types unchanged.
package v1

// GroupName is the API group of every type in this package.
const GroupName = "secrets-store.csi.x-k8s.io"

// Version is the API version of every type in this package.
const Version = "v1"
