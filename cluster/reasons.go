package cluster

// The reasons of the events the node's cluster side records. Every reason
// is named in docs/troubleshooting.md (docs/reasons_test.go checks it).
// The pod status's condition reasons are package podstatus's, the Secret
// sync's package secretobjects's; keymount-controller's are in controller/:
// restart on change's package restart's, the SecretSync reconciler's package
// secretsync's (beside the conditions' reasons in
// apis/secretsync/v1alpha1/conditions.go).
const (
	// ReasonSecretMountFailed (Warning, on the pod): a first publish
	// failed; nothing is mounted.
	ReasonSecretMountFailed = "SecretMountFailed"
	// ReasonSecretRefreshFailed (Warning, on the pod): a refresh failed;
	// the files mounted before are kept.
	ReasonSecretRefreshFailed = "SecretRefreshFailed"
	// ReasonSecretRefreshed (Normal, on the pod): a refresh changed the
	// mounted files.
	ReasonSecretRefreshed = "SecretRefreshed"
	// ReasonInvalidRotationAnnotation (Warning, on the class or pod): a
	// rotation annotation is invalid; the message names it and the fix.
	ReasonInvalidRotationAnnotation = "InvalidRotationAnnotation"
	// ReasonSubPathNotRefreshed (Warning, on the pod): containers mount
	// the refreshed volume through subPath and keep the old content. The
	// node records it: it is an event on a pod of the node, not a write to
	// a workload (restarts are keymount-controller's, package
	// controller/restart).
	ReasonSubPathNotRefreshed = "SecretSubPathNotRefreshed"
)
