package rotation

// Annotations keymount reads. A SecretProviderClass's spec stays upstream's:
// keymount's own settings are annotations.
const (
	// RefreshAnnotation on a SecretProviderClass (or a pod) asks for a
	// refresh of its volumes: any new value is a request. Argo CD's
	// "refresh" action (deploy/argocd) sets it to the current time.
	RefreshAnnotation = "keymount.io/refresh"
)
