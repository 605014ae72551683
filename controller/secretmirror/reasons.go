package secretmirror

// Event reasons on a SecretMirror. Synced, NoSecret, Error and VaultError
// are mirrors' own, with its meaning; the others are keymount's. A
// same-named Secret keymount did not write is fanout.ReasonCopyConflict
// (recorded by the fanout.Writer), and mirrorStatus Error.
const (
	// EventMirrorSynced (Normal): copies were written; the note names the source
	// and how many namespaces got one.
	EventMirrorSynced = "Synced"
	// EventMirrorNoSecret (Warning): the source Secret does not exist in the
	// SecretMirror's namespace; mirrorStatus Pending until it appears.
	EventMirrorNoSecret = "NoSecret"
	// EventMirrorError (Warning): some copies could not be written (the API
	// server refused them); mirrorStatus Error, retried.
	EventMirrorError = "Error"
	// EventMirrorVaultError (Warning): a Vault source could not be read (the
	// note names the path, who logged in and Vault's message), or
	// destination.type is vault, which keymount does not serve;
	// mirrorStatus Error.
	EventMirrorVaultError = "VaultError"
	// EventMirrorInvalidSpec (Warning): a destination regular expression does not
	// compile, or there is none; mirrorStatus Error until the spec is fixed.
	EventMirrorInvalidSpec = "InvalidSpec"
	// EventMirrorCopiesDeleted (Normal): copies keymount wrote were removed (their
	// namespace stopped matching, the source went, or the SecretMirror was
	// deleted with deletePolicy delete).
	EventMirrorCopiesDeleted = "CopiesDeleted"
)

// VaultDestinationMessage is status.message and the VaultError event's
// note for a Vault destination.
const VaultDestinationMessage = "destination.type vault: keymount does not write to Vault (it reads secrets from stores, never writes them back); keep mirrors for SecretMirrors that push to Vault, or copy into namespaces"

// Finalizer is mirrors' own: a SecretMirror mirrors created is finalized
// by keymount the same way, and back.
const Finalizer = "mirrors.kts.studio/finalizer"

// mirrors' annotations on a copy, written as mirrors writes them so a
// cluster can switch from mirrors to keymount and back: keymount adopts a
// Secret whose owned-by names the SecretMirror.
const (
	AnnotationOwnedBy       = "mirrors.kts.studio/owned-by"
	AnnotationLastSyncAt    = "mirrors.kts.studio/last-sync-at"
	AnnotationParentVersion = "mirrors.kts.studio/parent-version"
	AnnotationSourceType    = "mirrors.kts.studio/source-type"
)
