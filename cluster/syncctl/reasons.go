package syncctl

// Event reasons keymount-controller adds to the conditions' reasons (a
// created Secret is CreateSuccessful, a failure the failing condition's
// reason).
const (
	// ReasonSecretUpdated (Normal): a refresh changed the Secret; the note
	// names the keys added, changed and removed, never a value.
	ReasonSecretUpdated = "SecretUpdated"
)
