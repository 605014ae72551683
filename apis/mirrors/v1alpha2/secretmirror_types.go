package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SourceType is where a SecretMirror reads: a Secret of its namespace or a
// Vault path.
// +kubebuilder:validation:Enum=secret;vault
type SourceType string

// The source types mirrors defines.
const (
	SourceTypeSecret SourceType = "secret"
	SourceTypeVault  SourceType = "vault"
)

// DestinationType is where a SecretMirror writes: Secrets in the matching
// namespaces or a Vault path.
// +kubebuilder:validation:Enum=namespaces;vault
type DestinationType string

// The destination types mirrors defines.
const (
	DestinationTypeNamespaces DestinationType = "namespaces"
	DestinationTypeVault      DestinationType = "vault"
)

// DeletePolicy says what happens to the copies when their SecretMirror is
// deleted.
// +kubebuilder:validation:Enum=delete;retain
type DeletePolicy string

// The delete policies mirrors defines.
const (
	// DeletePolicyDelete removes the copies with the SecretMirror (mirrors'
	// default).
	DeletePolicyDelete DeletePolicy = "delete"
	// DeletePolicyRetain leaves them.
	DeletePolicyRetain DeletePolicy = "retain"
)

// MirrorStatus is the state status.mirrorStatus reports.
// +kubebuilder:validation:Enum=Pending;Active;Error
type MirrorStatus string

// The states mirrors reports.
const (
	// MirrorStatusPending: not synced yet (the source Secret is missing).
	MirrorStatusPending MirrorStatus = "Pending"
	// MirrorStatusActive: every matching namespace holds the copy.
	MirrorStatusActive MirrorStatus = "Active"
	// MirrorStatusError: a copy could not be written; status.message says why.
	MirrorStatusError MirrorStatus = "Error"
)

// DefaultPollPeriodSeconds is the re-sync period of a SecretMirror without
// pollPeriodSeconds: 3 minutes, as mirrors sets it.
const DefaultPollPeriodSeconds = 180

// SecretMirror copies a Secret of its namespace into every namespace whose
// name matches one of spec.destination.namespaces, and keeps the copies in
// step.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Source Type",type=string,JSONPath=`.spec.source.type`
// +kubebuilder:printcolumn:name="Source Name",type=string,JSONPath=`.spec.source.name`
// +kubebuilder:printcolumn:name="Destination Type",type=string,JSONPath=`.spec.destination.type`
// +kubebuilder:printcolumn:name="Delete Policy",type=string,JSONPath=`.spec.deletePolicy`
// +kubebuilder:printcolumn:name="Poll Period",type=integer,JSONPath=`.spec.pollPeriodSeconds`
// +kubebuilder:printcolumn:name="Mirror Status",type=string,JSONPath=`.status.mirrorStatus`
// +kubebuilder:printcolumn:name="Last Sync Time",type=string,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecretMirror struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SecretMirrorSpec   `json:"spec,omitempty"`
	Status SecretMirrorStatus `json:"status,omitempty"`
}

// SecretMirrorList is a list of SecretMirrors.
//
// +kubebuilder:object:root=true
type SecretMirrorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SecretMirror `json:"items"`
}

// SecretMirrorSpec says what to copy and where.
type SecretMirrorSpec struct {
	// source is the Secret to copy, always in the SecretMirror's namespace.
	// +optional
	Source SecretMirrorSource `json:"source,omitempty"`

	// destination names the namespaces that receive the copy.
	// +optional
	Destination SecretMirrorDestination `json:"destination,omitempty"`

	// deletePolicy: delete (the default) removes the copies keymount wrote
	// when the SecretMirror is deleted; retain leaves them.
	// +optional
	DeletePolicy DeletePolicy `json:"deletePolicy,omitempty"`

	// pollPeriodSeconds is the re-sync period (default 180). keymount also
	// re-syncs at once when a namespace appears or a copy is edited.
	// +optional
	PollPeriodSeconds int64 `json:"pollPeriodSeconds,omitempty"`
}

// SecretMirrorSource is the Secret to copy.
type SecretMirrorSource struct {
	// type is secret (the default) or vault: the KV secret at vault.path,
	// each field a key of the copies, named name.
	// +optional
	// +kubebuilder:default:=secret
	Type SourceType `json:"type,omitempty"`

	// name is the source Secret's name, and the copies' (default: the
	// SecretMirror's name).
	// +optional
	Name string `json:"name,omitempty"`

	// vault is mirrors' Vault source: where to read and how to log in.
	// +optional
	Vault *VaultSpec `json:"vault,omitempty"`
}

// SecretMirrorDestination names where the copies go.
type SecretMirrorDestination struct {
	// type is namespaces (the default) or vault: the source's data is
	// written to the KV secret at vault.path.
	// +optional
	// +kubebuilder:default:=namespaces
	Type DestinationType `json:"type,omitempty"`

	// namespaces are regular expressions (Go syntax, unanchored, as mirrors
	// matches them): every namespace whose name matches one gets a copy.
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// vault is mirrors' Vault destination: the KV path the source's data
	// is written to (type vault).
	// +optional
	Vault *VaultSpec `json:"vault,omitempty"`

	// namespaceRegex is v1alpha1's single regular expression, served the
	// same way as one entry of namespaces.
	// +optional
	NamespaceRegex string `json:"namespaceRegex,omitempty"`

	// namespace is v1alpha1's single namespace name (matched exactly).
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// VaultSpec is mirrors' Vault address, path and login.
type VaultSpec struct {
	// addr is Vault's address, e.g. https://vault.example.com:8200.
	// +optional
	Addr string `json:"addr,omitempty"`
	// path is the API path of a KV secret as mirrors reads it: of a KV
	// version 2 engine with its data segment (secret/data/team/db), of
	// version 1 as mounted (kv/team/db).
	// +optional
	Path string `json:"path,omitempty"`
	// auth is mirrors' login (approle or token) or keymount's kubernetes.
	// Other spellings mirrors' releases used (appRole, roleIdKey) are kept
	// as sent.
	// +optional
	Auth *VaultAuth `json:"auth,omitempty"`
}

// VaultAuth is mirrors' Vault login.
// +kubebuilder:pruning:PreserveUnknownFields
type VaultAuth struct {
	// +optional
	AppRole *VaultAppRoleAuth `json:"approle,omitempty"`
	// +optional
	Token *VaultTokenAuth `json:"token,omitempty"`
	// kubernetes logs in with Vault's Kubernetes auth as a ServiceAccount
	// of the SecretMirror's namespace (keymount's addition).
	// +optional
	Kubernetes *VaultKubernetesAuth `json:"kubernetes,omitempty"`
}

// VaultKubernetesAuth is a login with Vault's Kubernetes auth method as a
// ServiceAccount of the SecretMirror's namespace, with a token
// keymount-controller requests for it.
type VaultKubernetesAuth struct {
	// role is the Vault role of the Kubernetes auth method.
	// +optional
	Role string `json:"role,omitempty"`
	// mountPath is where the Kubernetes auth method is mounted (default
	// kubernetes).
	// +optional
	MountPath string `json:"mountPath,omitempty"`
	// serviceAccountName is the ServiceAccount (default: default).
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// audience of the token (default vault); keymount-controller must be
	// allowed to request it (--token-request-audience).
	// +optional
	Audience string `json:"audience,omitempty"`
}

// VaultAppRoleAuth is an AppRole login whose role and secret IDs are in a
// Secret.
type VaultAppRoleAuth struct {
	// +optional
	SecretRef *corev1.SecretReference `json:"secretRef,omitempty"`
	// +optional
	AppRolePath string `json:"appRolePath,omitempty"`
	// +optional
	RoleIDKey string `json:"roleIDKey,omitempty"`
	// +optional
	SecretIDKey string `json:"secretIDKey,omitempty"`
}

// VaultTokenAuth is a Vault token kept in a Secret.
type VaultTokenAuth struct {
	// +optional
	SecretRef *corev1.SecretReference `json:"secretRef,omitempty"`
	// +optional
	TokenKey string `json:"tokenKey,omitempty"`
}

// SecretMirrorStatus is what keymount observed on its last sync.
type SecretMirrorStatus struct {
	// mirrorStatus is Pending, Active or Error, as mirrors reports it.
	// +optional
	// +kubebuilder:default:=Pending
	MirrorStatus MirrorStatus `json:"mirrorStatus,omitempty"`

	// lastSyncTime is when the copies were last found or made current.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`

	// message explains mirrorStatus: the missing source, the namespaces
	// whose copy could not be written and why (keymount's addition).
	// +optional
	Message string `json:"message,omitempty"`

	// observedGeneration is the generation this status describes
	// (keymount's addition).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// vaultSource is the lease of a dynamic Vault source (mirrors' field):
	// renewed at every poll instead of issuing new credentials.
	// +optional
	VaultSource *VaultSourceStatus `json:"vaultSource,omitempty"`

	// vaultDestination is what keymount last wrote to a Vault destination
	// (keymount's addition): the next write is a check-and-set against
	// its version, so a value someone else wrote since is never replaced
	// unknowingly.
	// +optional
	VaultDestination *VaultDestinationStatus `json:"vaultDestination,omitempty"`
}

// VaultSourceStatus is the lease of a dynamic Vault source.
type VaultSourceStatus struct {
	// leaseID of the credentials the copies hold.
	// +optional
	LeaseID string `json:"leaseID,omitempty"`
	// leaseDuration is the lease's TTL in seconds at its last renewal.
	// +optional
	LeaseDuration int `json:"leaseDuration,omitempty"`
}

// VaultDestinationStatus is the KV secret keymount last wrote.
type VaultDestinationStatus struct {
	// addr and path written to.
	// +optional
	Addr string `json:"addr,omitempty"`
	// +optional
	Path string `json:"path,omitempty"`
	// version is the KV version 2 version keymount wrote (0 for KV
	// version 1, which has none).
	// +optional
	Version int `json:"version,omitempty"`
}
