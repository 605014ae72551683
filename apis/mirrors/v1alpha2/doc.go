// Package v1alpha2 contains the mirrors.kts.studio/v1alpha2 API types:
// SecretMirror, which copies a Secret of its namespace into every namespace
// matching one of its regular expressions (ktsstudio/mirrors' CRD, its
// storage version).
//
// The spec has ktsstudio/mirrors' field names, JSON tags, enums and
// defaults, so its manifests apply unchanged. Its schema is also v1alpha1's
// (destination.namespace and destination.namespaceRegex are v1alpha1's
// fields, kept here): the two versions share one schema, so the API server
// serves both without a conversion webhook. keymount adds status.message and
// status.observedGeneration.
//
// +kubebuilder:object:generate=true
// +groupName=mirrors.kts.studio
package v1alpha2
