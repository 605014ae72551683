package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelSecretSync is the label the controller puts, with an empty value, on
// every Secret it writes. It is also the reserved prefix of spec.secretObject
// label and annotation keys: the CRD refuses keys that start with it.
const LabelSecretSync = "secrets-store.sync.x-k8s.io"

// SecretSync asks for a Kubernetes Secret filled from an external secret
// store, without a pod. The Secret has the SecretSync's name and namespace;
// the SecretSync is its one owner.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.secretProviderClassName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Synced",type=date,JSONPath=`.status.lastSuccessfulSyncTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecretSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SecretSyncSpec   `json:"spec,omitempty"`
	Status SecretSyncStatus `json:"status,omitempty"`
}

// SecretSyncList is a list of SecretSyncs.
//
// +kubebuilder:object:root=true
type SecretSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SecretSync `json:"items"`
}

// SecretSyncSpec says where the Secret's values come from and what the
// Secret looks like.
type SecretSyncSpec struct {
	// secretSyncControllerName names the controller meant to handle this
	// SecretSync. The sync controller v0.0.5 defines it without reading it;
	// so does keymount.
	// +optional
	// +kubebuilder:default:=""
	SecretSyncControllerName string `json:"secretSyncControllerName"`

	// secretProviderClassName is the SecretProviderClass, in the
	// SecretSync's namespace, that names the provider and its parameters.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$
	SecretProviderClassName string `json:"secretProviderClassName"`

	// serviceAccountName is the ServiceAccount, in the SecretSync's
	// namespace, whose tokens (one per audience the controller is configured
	// with) the provider gets to reach the store.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$
	ServiceAccountName string `json:"serviceAccountName"`

	// secretObject describes the Secret to write.
	// +kubebuilder:validation:Required
	SecretObject SecretObject `json:"secretObject"`

	// forceSynchronization, when changed to any new value, makes the
	// controller fetch from the store and write the Secret again. It does
	// not resolve server-side apply conflicts (it is not the apply's force
	// option).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=^[A-Za-z0-9]([-A-Za-z0-9]+([-._a-zA-Z0-9]?[A-Za-z0-9])*)?$
	ForceSynchronization string `json:"forceSynchronization,omitempty"`
}

// SecretObject is the Secret the controller writes.
type SecretObject struct {
	// type is the Secret's type, Opaque when left out. The guard rails
	// (ValidatingAdmissionPolicies) decide which types the controller may
	// write; kubernetes.io/tls gets tls.crt and tls.key split from a PEM or
	// PFX object.
	// +optional
	// +kubebuilder:validation:Optional
	// +kubebuilder:default:=Opaque
	// +kubebuilder:validation:Pattern=^[^\s]+$
	Type string `json:"type"`

	// data maps the provider's files to the Secret's keys, one entry per
	// key.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinItems=1
	// +listType=map
	// +listMapKey=targetKey
	Data []SecretObjectData `json:"data"`

	// labels are put on the Secret, besides the controller's own
	// secrets-store.sync.x-k8s.io label. Keys must not start with
	// secrets-store.sync.x-k8s.io.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(self.all(x, x.size() <= 317 && self[x].size() <= 63) == true)",message="Label keys must not exceed 317 characters (254 for prefix+separator, 63 for name), label values must not exceed 63 characters."
	// +kubebuilder:validation:XValidation:rule="(self.all(x, x.startsWith('secrets-store.sync.x-k8s.io') == false))",message="Labels should not contain secrets-store.sync.x-k8s.io. This key is reserved for the controller."
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are put on the Secret. Keys must not start with
	// secrets-store.sync.x-k8s.io.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(self.all(x, x.size() < 317 && self[x].size() <= 262144) == true)",message="Annotations keys must not exceed 317 characters (254 for prefix+separator, 63 for name), annotation values must not exceed 256 kB."
	// +kubebuilder:validation:XValidation:rule="(self.all(x, x.startsWith('secrets-store.sync.x-k8s.io') == false))",message="Annotations should not contain secrets-store.sync.x-k8s.io. This key is reserved for the controller."
	Annotations map[string]string `json:"annotations,omitempty"`
}

// SecretObjectData maps one file the provider returns to one Secret key.
type SecretObjectData struct {
	// sourcePath is the path of a file in the provider's answer (the
	// object's name or alias in the SecretProviderClass).
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=^[A-Za-z0-9.]([-A-Za-z0-9]+([-._a-zA-Z0-9]?[A-Za-z0-9])*)?(\/([0-9]+))*$
	SourcePath string `json:"sourcePath"`

	// targetKey is the key of the Secret's data that gets the file's
	// content.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=^[A-Za-z0-9.]([-A-Za-z0-9]+([-._a-zA-Z0-9]?[A-Za-z0-9])*)?(\/([0-9]+))*$
	TargetKey string `json:"targetKey"`
}

// SecretSyncStatus is what the controller last did. syncHash,
// lastSuccessfulSyncTime and conditions are the sync controller's;
// observedGeneration, objects and handledRefresh are keymount's.
type SecretSyncStatus struct {
	// syncHash identifies what the Secret was last written from (the
	// values, the class and the SecretSync). keymount keys it with a secret
	// only the controller holds, so it reveals nothing about the values.
	// +optional
	SyncHash string `json:"syncHash,omitempty"`

	// lastSuccessfulSyncTime is when the store was last read and the Secret
	// found or made current.
	// +optional
	LastSuccessfulSyncTime *metav1.Time `json:"lastSuccessfulSyncTime,omitempty"`

	// conditions are SecretCreated and SecretUpdated (the sync
	// controller's) and Ready (keymount's); see conditions.go for the
	// reasons.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// observedGeneration is the metadata.generation the status describes
	// (keymount).
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// objects are the versions of the store's objects the Secret was last
	// written from, as the provider reported them; the next refresh sends
	// them back to the provider (keymount).
	// +optional
	// +listType=atomic
	Objects []SecretSyncObject `json:"objects,omitempty"`

	// handledRefresh is the value of the keymount.io/refresh annotation the
	// controller last acted on, so a changed value triggers one refresh
	// (keymount).
	// +optional
	HandledRefresh string `json:"handledRefresh,omitempty"`
}

// SecretSyncObject is one store object the Secret was written from.
type SecretSyncObject struct {
	// id is the provider's ID of the object.
	ID string `json:"id"`
	// version is the object's version, as the provider reported it.
	// +optional
	Version string `json:"version,omitempty"`
}
