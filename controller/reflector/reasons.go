package reflector

// Event reasons of the reflector reconcilers (besides fanout's
// CopyConflict, CopyFailed and InvalidNamespaces).
const (
	// ReasonReflectionDenied (Warning, on a manual mirror): its source does
	// not allow reflection into the mirror's namespace (reflection-allowed
	// is not true, or the namespace is not in
	// reflection-allowed-namespaces or its selector); the mirror is left
	// as it is.
	ReasonReflectionDenied = "ReflectionDenied"
	// ReasonSourceNotFound (Warning, on a manual mirror): the source its
	// reflects annotation names does not exist.
	ReasonSourceNotFound = "SourceNotFound"
)
