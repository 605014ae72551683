// Package v1alpha1 contains the secrets-store.csi.x-k8s.io/v1alpha1 API
// types. The version is served for manifests written against it and marked
// deprecated, as upstream's is (the API server warns whoever uses it); v1 is
// the storage version and the schemas are identical, so the API server converts
// between them without a webhook. Code reads and writes v1.
//
// +kubebuilder:object:generate=true
// +groupName=secrets-store.csi.x-k8s.io
package v1alpha1
