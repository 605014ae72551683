// Package v1alpha1 contains the secret-sync.x-k8s.io/v1alpha1 API types:
// SecretSync, the object keymount-controller turns into a Kubernetes Secret
// without a pod.
//
// The spec is the one of kubernetes-sigs/secrets-store-sync-controller
// v0.0.5: the same field names, JSON tags, defaults and validation (patterns,
// lengths, list semantics and every CEL rule with its message), so the sync
// controller's manifests apply unchanged and are refused where its CRD
// refuses them. keymount's CRD is a superset: its extras are in status only
// (the Ready condition, observedGeneration, the provider's object versions,
// the refresh trigger acted on) and in printer columns.
//
// Condition types, reasons and messages are in conditions.go.
//
// +kubebuilder:object:generate=true
// +groupName=secret-sync.x-k8s.io
package v1alpha1
