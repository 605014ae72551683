package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Provider names the provider plugin that serves a class, such as "aws",
// "azure", "gcp", "vault" or "local". The driver finds it at
// <provider dir>/<provider>.sock.
type Provider string

// SecretObjectData maps one mounted object to one key of a synced Secret.
type SecretObjectData struct {
	// ObjectName is the name of the mounted file (the object alias, or name).
	ObjectName string `json:"objectName,omitempty"`
	// Key is the data key in the Kubernetes Secret.
	Key string `json:"key,omitempty"`
}

// SecretObject describes a Kubernetes Secret mirrored from mounted files.
type SecretObject struct {
	// SecretName is the name of the Kubernetes Secret.
	SecretName string `json:"secretName,omitempty"`
	// Type is the Kubernetes Secret type, such as Opaque or kubernetes.io/tls.
	Type string `json:"type,omitempty"`
	// Labels are applied to the Secret.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are applied to the Secret.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Data lists the mounted objects copied into the Secret.
	Data []*SecretObjectData `json:"data,omitempty"`
}

// SecretProviderClassSpec is what a class asks of its provider.
type SecretProviderClassSpec struct {
	// Provider is the name of the provider plugin.
	Provider Provider `json:"provider,omitempty"`
	// Parameters are handed to the provider, merged with the volume context.
	Parameters map[string]string `json:"parameters,omitempty"`
	// SecretObjects are Kubernetes Secrets to mirror the mounted files into.
	SecretObjects []*SecretObject `json:"secretObjects,omitempty"`
}

// ByPodStatus names one pod status that uses a class.
type ByPodStatus struct {
	// ID is the name of the SecretProviderClassPodStatus.
	ID string `json:"id,omitempty"`
	// Namespace is the pod's namespace.
	Namespace string `json:"namespace,omitempty"`
}

// SecretProviderClassStatus is kept for compatibility with upstream
// manifests; keymount reports per-pod state in pod statuses instead.
type SecretProviderClassStatus struct {
	ByPod []*ByPodStatus `json:"byPod,omitempty"`
}

// SecretProviderClass is the schema of a secrets-store class.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecretProviderClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SecretProviderClassSpec   `json:"spec,omitempty"`
	Status SecretProviderClassStatus `json:"status,omitempty"`
}

// SecretProviderClassList is a list of SecretProviderClasses.
//
// +kubebuilder:object:root=true
type SecretProviderClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SecretProviderClass `json:"items"`
}
