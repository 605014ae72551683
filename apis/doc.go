// Package apis holds the Kubernetes API types keymount serves and reads:
// the secrets-store.csi.x-k8s.io group, field-compatible with the upstream
// Secrets Store CSI Driver so that existing manifests apply unchanged.
package apis
