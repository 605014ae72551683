package secretobjects

// The reasons of the SecretsSynced condition and of the sync's events.
// Every reason is named in docs/troubleshooting.md (docs/reasons_test.go
// checks it).

// Reasons of the SecretsSynced condition.
const (
	// ReasonSynced: every Secret of the class matches the mounted files.
	ReasonSynced = "Synced"
	// ReasonContentKept: every Secret of the class is synced, but one or
	// more keep the content another node synced from a provider's answer
	// newer than this volume's, or too close to it to tell which is newer.
	ReasonContentKept = "ContentKept"
	// ReasonSyncFailed: a Secret could not be built or written; the message
	// says which and why.
	ReasonSyncFailed = "SyncFailed"
	// ReasonClaimedByOtherClass: another class of the namespace syncs the
	// Secret.
	ReasonClaimedByOtherClass = "SecretClaimedByOtherClass"
	// ReasonNotManaged: a Secret of that name exists and keymount did not
	// create it.
	ReasonNotManaged = "SecretNotManaged"
	// ReasonTypeMismatch: the Secret exists with another type.
	ReasonTypeMismatch = "SecretTypeMismatch"
)

// Event reasons, on the pod.
const (
	// EventSynced (Normal): a Secret's data changed.
	EventSynced = "SecretSynced"
	// EventSyncFailed (Warning): a Secret could not be synced.
	EventSyncFailed = "SecretSyncFailed"
)
