package rotation

// Annotations keymount reads. A SecretProviderClass's spec stays upstream's:
// keymount's own settings are annotations, all under AnnotationPrefix, all
// documented in the README's "Annotations" section.
const (
	// AnnotationPrefix starts every annotation keymount reads; the driver's
	// caches keep only these of pods and classes.
	AnnotationPrefix = "keymount.io/"

	// RefreshAnnotation on a SecretProviderClass (all its volumes) or a pod
	// (that pod's volumes) asks for a refresh: any new value is a request.
	// Argo CD's "refresh" action (deploy/argocd) sets it to the current time.
	RefreshAnnotation = "keymount.io/refresh"

	// PolicyAnnotation on a class sets when its volumes are refreshed:
	// Periodic, CreatedOnce or OnDemand.
	PolicyAnnotation = "keymount.io/rotation-policy"
	// IntervalAnnotation on a class sets the Periodic interval, a Go
	// duration ("10m", "1h30m").
	IntervalAnnotation = "keymount.io/rotation-interval"
	// JitterAnnotation on a class spreads its volumes' Periodic refreshes:
	// each volume waits the interval plus a fixed share of the jitter,
	// derived from its volume ID, so a fleet does not refresh in step.
	JitterAnnotation = "keymount.io/rotation-jitter"

	// RestartAnnotation "true" on a class, or on a workload's pod template,
	// restarts the workload (Deployment, StatefulSet, DaemonSet) when a
	// refresh changes its volume's content; "false" on a pod opts it out of
	// its class's "true". On a workload (or its pod template) it also
	// restarts it when a SecretSync's Secret it consumes changes.
	// keymount-controller (package controller/restart) sets the pod-template
	// annotation keymount.io/rollout-<class> (restart.RolloutAnnotationPrefix)
	// that does it; the node driver only reports the change.
	RestartAnnotation = "keymount.io/restart-on-change"
)
