package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
)

// v1alpha2's SecretMirror served as v1alpha1, with v1alpha1's printer
// columns. Its doc comment is the CRD schema's description: it must stay
// v1alpha2's word for word, so both versions have one schema.

// SecretMirror copies a Secret of its namespace into every namespace whose
// name matches one of spec.destination.namespaces, and keeps the copies in
// step.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Source Name",type=string,JSONPath=`.spec.source.name`
// +kubebuilder:printcolumn:name="Dest Namespace",type=string,JSONPath=`.spec.destination.namespace`
// +kubebuilder:printcolumn:name="Dest Namespace Regex",type=string,JSONPath=`.spec.destination.namespaceRegex`
// +kubebuilder:printcolumn:name="Poll Period",type=integer,JSONPath=`.spec.pollPeriodSeconds`
// +kubebuilder:printcolumn:name="Mirror Status",type=string,JSONPath=`.status.mirrorStatus`
// +kubebuilder:printcolumn:name="Last Sync Time",type=string,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecretMirror struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   mirrorsv1alpha2.SecretMirrorSpec   `json:"spec,omitempty"`
	Status mirrorsv1alpha2.SecretMirrorStatus `json:"status,omitempty"`
}

// SecretMirrorList is a list of SecretMirrors.
//
// +kubebuilder:object:root=true
type SecretMirrorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SecretMirror `json:"items"`
}
