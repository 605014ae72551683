// Package v1alpha1 contains the mirrors.kts.studio/v1alpha1 API types,
// served for manifests written against ktsstudio/mirrors' first version.
//
// Its schema is v1alpha2's (which keeps v1alpha1's destination.namespace
// and destination.namespaceRegex), so the API server serves both versions
// of one stored object without a conversion webhook; only the printer
// columns are v1alpha1's. keymount-controller reads v1alpha2.
//
// +kubebuilder:object:generate=true
// +groupName=mirrors.kts.studio
package v1alpha1
