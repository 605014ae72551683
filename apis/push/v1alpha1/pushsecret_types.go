package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpdatePolicy says what a push does where the store already holds a value.
// +kubebuilder:validation:Enum=Replace;IfNotExists
type UpdatePolicy string

const (
	// UpdatePolicyReplace (the default, ESO's) replaces a value keymount
	// wrote, or one the External Secrets Operator marked as its own (a
	// migrated PushSecret's); a value neither wrote is reported
	// (PushConflict), not replaced, unless the PushSecret is annotated
	// AnnotationOverwrite.
	UpdatePolicyReplace UpdatePolicy = "Replace"
	// UpdatePolicyIfNotExists writes only where nothing is, and never
	// again once something is there.
	UpdatePolicyIfNotExists UpdatePolicy = "IfNotExists"
)

// DeletionPolicy says what happens to the pushed values when the
// PushSecret is deleted or stops naming them.
// +kubebuilder:validation:Enum=Delete;None
type DeletionPolicy string

const (
	// DeletionPolicyNone (the default) leaves them in the store.
	DeletionPolicyNone DeletionPolicy = "None"
	// DeletionPolicyDelete removes what keymount wrote, and only that: a
	// value someone else wrote since is left.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// AnnotationOverwrite set to "true" on a PushSecret lets it replace values
// in the store that keymount did not write.
const AnnotationOverwrite = "keymount.io/push-overwrite"

// AnnotationPushPaths on a SecretProviderClass lists, comma-separated, the
// prefixes of the remote keys PushSecrets may push to through it: a
// PushSecret naming the class with another remote key is refused (the
// admission policy <release>-push-paths, and keymount-controller,
// PathNotAllowed). A class without it restricts nothing beyond the
// identity's own store policy.
const AnnotationPushPaths = "keymount.io/push-paths"

// Finalizer holds a PushSecret with deletionPolicy Delete until its values
// are removed from the store.
const Finalizer = "keymount.io/push-secret"

// ConditionReady is the condition type of status.conditions.
const ConditionReady = "Ready"

// PushSecret writes values of a Secret of its namespace into a store.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.secretProviderClassName`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.selector.secret.name`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PushSecret struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PushSecretSpec   `json:"spec,omitempty"`
	Status PushSecretStatus `json:"status,omitempty"`
}

// PushSecretList is a list of PushSecrets.
//
// +kubebuilder:object:root=true
type PushSecretList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PushSecret `json:"items"`
}

// PushSecretSpec says what to push, where, and as whom.
type PushSecretSpec struct {
	// secretProviderClassName names the SecretProviderClass of the store,
	// in the PushSecret's namespace: its provider writes, with its
	// parameters (keymount convert makes it from the SecretStore).
	// +kubebuilder:validation:MinLength=1
	SecretProviderClassName string `json:"secretProviderClassName"`

	// serviceAccountName is the ServiceAccount of the PushSecret's
	// namespace whose identity writes (its tokens go to the provider, as a
	// SecretSync's do). Default: default.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// refreshInterval is how often the values are pushed again (ESO's;
	// default 1h). keymount also pushes at once when the Secret changes.
	// "0s" pushes on changes only.
	// +optional
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`

	// updatePolicy: Replace (the default) or IfNotExists.
	// +optional
	// +kubebuilder:default:=Replace
	UpdatePolicy UpdatePolicy `json:"updatePolicy,omitempty"`

	// deletionPolicy: None (the default) or Delete.
	// +optional
	// +kubebuilder:default:=None
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// selector names the Secret to push, in the PushSecret's namespace.
	Selector PushSecretSelector `json:"selector"`

	// data maps the Secret's keys to the store's objects.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Data []PushSecretData `json:"data"`
}

// PushSecretSelector names the source Secret.
type PushSecretSelector struct {
	Secret PushSecretSecret `json:"secret"`
}

// PushSecretSecret is the source Secret's name.
type PushSecretSecret struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// PushSecretData is one value to push.
type PushSecretData struct {
	Match PushSecretMatch `json:"match"`
	// objectType chooses the store where the provider has several (AWS:
	// secretsmanager, the default, or ssmparameter; keymount convert sets
	// it from the SecretStore's service).
	// +optional
	ObjectType string `json:"objectType,omitempty"`
}

// PushSecretMatch maps a Secret key to a remote object.
type PushSecretMatch struct {
	// secretKey is the Secret's key to push; empty pushes the whole
	// Secret as a JSON object of its keys (ESO's).
	// +optional
	SecretKey string              `json:"secretKey,omitempty"`
	RemoteRef PushSecretRemoteRef `json:"remoteRef"`
}

// PushSecretRemoteRef names the store's object.
type PushSecretRemoteRef struct {
	// remoteKey is the store's object: a Secrets Manager secret, an SSM
	// parameter, a Vault KV API path (<mount>/data/<name>).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	RemoteKey string `json:"remoteKey"`
	// property, when set, is one field of the remote value (a JSON key, a
	// KV field); the others are kept.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Property string `json:"property,omitempty"`
}

// PushSecretStatus is what keymount observed on its last push.
type PushSecretStatus struct {
	// conditions: Ready (reason Synced, PushConflict, PushFailed,
	// SecretMissing, ...).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// refreshTime is when the values were last pushed or confirmed.
	// +optional
	RefreshTime *metav1.Time `json:"refreshTime,omitempty"`
	// syncedResourceVersion is the source Secret's resourceVersion last
	// pushed (ESO's field).
	// +optional
	SyncedResourceVersion string `json:"syncedResourceVersion,omitempty"`
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// pushed are the values keymount wrote and the store's version of
	// each: the next write is conditional on it, and deletionPolicy Delete
	// removes these only.
	// +optional
	Pushed []PushedValue `json:"pushed,omitempty"`
}

// PushedValue is one value keymount wrote.
type PushedValue struct {
	RemoteKey string `json:"remoteKey"`
	// +optional
	Property string `json:"property,omitempty"`
	// +optional
	ObjectType string `json:"objectType,omitempty"`
	// version is the store's version of keymount's write.
	// +optional
	Version string `json:"version,omitempty"`
}
