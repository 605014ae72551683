package restart

// The reasons of the events restart on change records. Every reason is
// named in docs/troubleshooting.md (docs/reasons_test.go checks it).
const (
	// ReasonRestarting, on the workload: keymount changed its pod template.
	ReasonRestarting = "SecretRestarting"
	// ReasonRestartSkipped, on the pod: it opted in, but has no workload
	// keymount restarts.
	ReasonRestartSkipped = "SecretRestartSkipped"
	// ReasonRestartFailed, on the pod: reading or patching its workload
	// failed (forbidden without the RBAC component).
	ReasonRestartFailed = "SecretRestartFailed"
)
