package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and condition types of pod statuses.
const (
	// InternalNodeLabel carries the node a pod status was written on, so a
	// driver watches only its own node's statuses.
	InternalNodeLabel = "internal.secrets-store.csi.k8s.io/node-name"

	// ConditionMounted is True while the volume is mounted with content.
	ConditionMounted = "Mounted"
	// ConditionCurrent is True when the last refresh succeeded, so the
	// files hold what the store returned at lastRefreshTime.
	ConditionCurrent = "Current"
	// ConditionSecretsSynced is True when every secretObject of the class
	// was applied to its Kubernetes Secret.
	ConditionSecretsSynced = "SecretsSynced"
	// ConditionRotationPolicy is False while the class has an invalid
	// rotation annotation (the message names it; the node's default
	// applies); absent otherwise.
	ConditionRotationPolicy = "RotationPolicyValid"
	// ConditionContentChanged is True once a refresh changed the mounted
	// content after the first mount (lastTransitionTime: the first such
	// change); absent before. With objects it is the change report
	// keymount-controller restarts workloads from (restart on change).
	ConditionContentChanged = "ContentChanged"
)

// SecretProviderClassObject is one object mounted into a pod.
type SecretProviderClassObject struct {
	// ID is the provider's object ID.
	ID string `json:"id,omitempty"`
	// Version is the object's version, as the provider reported it.
	Version string `json:"version,omitempty"`
	// Error is the last error about this object, when the provider named it.
	// +optional
	Error string `json:"error,omitempty"`
}

// SecretProviderClassPodStatusStatus is what is mounted for one pod volume.
type SecretProviderClassPodStatusStatus struct {
	PodName                 string                      `json:"podName,omitempty"`
	SecretProviderClassName string                      `json:"secretProviderClassName,omitempty"`
	Mounted                 bool                        `json:"mounted,omitempty"`
	TargetPath              string                      `json:"targetPath,omitempty"`
	Objects                 []SecretProviderClassObject `json:"objects,omitempty"`

	// Conditions say whether the volume is mounted, current and synced.
	// Their observedGeneration is the class generation they describe.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastRefreshTime is when the provider last answered successfully.
	// +optional
	LastRefreshTime *metav1.Time `json:"lastRefreshTime,omitempty"`
	// ObservedGeneration is the class generation last mounted.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// HandledRefresh are the values of the keymount.io/refresh annotation
	// on the class and on the pod that the volume last acted on.
	// +optional
	HandledRefresh *HandledRefresh `json:"handledRefresh,omitempty"`
}

// HandledRefresh are refresh trigger values a volume acted on.
type HandledRefresh struct {
	// Class is the class's keymount.io/refresh value.
	// +optional
	Class string `json:"class,omitempty"`
	// Pod is the pod's keymount.io/refresh value.
	// +optional
	Pod string `json:"pod,omitempty"`
}

// SecretProviderClassPodStatus records what the driver mounted for one pod
// volume. Its name is <pod>-<namespace>-<class>, as upstream's.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.status.podName`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.status.secretProviderClassName`
// +kubebuilder:printcolumn:name="Mounted",type=string,JSONPath=`.status.conditions[?(@.type=="Mounted")].status`
// +kubebuilder:printcolumn:name="Current",type=string,JSONPath=`.status.conditions[?(@.type=="Current")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Current")].reason`
// +kubebuilder:printcolumn:name="Refreshed",type=date,JSONPath=`.status.lastRefreshTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecretProviderClassPodStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status SecretProviderClassPodStatusStatus `json:"status,omitempty"`
}

// SecretProviderClassPodStatusList is a list of pod statuses.
//
// +kubebuilder:object:root=true
type SecretProviderClassPodStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SecretProviderClassPodStatus `json:"items"`
}
