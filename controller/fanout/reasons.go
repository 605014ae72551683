package fanout

// Event reasons of the fan-out controllers (reflector's annotations,
// SecretMirrors), recorded on the object that asked for the copies.
const (
	// ReasonCopyConflict (Warning): a Secret or ConfigMap of the copy's
	// name exists in the target namespace and keymount did not write it;
	// it is left alone. Delete or rename it, or drop the namespace from
	// the source's list.
	ReasonCopyConflict = "CopyConflict"
	// ReasonCopyFailed (Warning): writing or deleting a copy failed; the
	// note names the namespace and the API server's answer. Retried with
	// backoff.
	ReasonCopyFailed = "CopyFailed"
	// ReasonInvalidNamespaces (Warning): a namespace pattern or selector
	// of the source does not parse; it matches nothing (fails closed).
	ReasonInvalidNamespaces = "InvalidNamespaces"
)
