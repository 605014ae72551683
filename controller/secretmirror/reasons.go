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
	// EventMirrorVaultError (Warning): a Vault source could not be read, or
	// a Vault destination written (the note names the path, who logged in
	// and Vault's message); mirrorStatus Error.
	EventMirrorVaultError = "VaultError"
	// EventMirrorVaultConflict (Warning): the Vault destination holds a
	// value keymount did not write (or another writer came first): not
	// replaced; mirrorStatus Error until it is keymount's or
	// AnnotationVaultOverwrite says to replace it.
	EventMirrorVaultConflict = "VaultConflict"
	// EventMirrorVaultLeaseRenew (Normal): a dynamic Vault source's lease
	// was renewed at a poll; no new credentials (mirrors' reason).
	EventMirrorVaultLeaseRenew = "VaultLeaseRenew"
	// EventMirrorVaultNewCreds (Normal): a dynamic Vault source was read
	// under a new lease: the first read, or the old lease at its max TTL
	// or gone (mirrors' reason).
	EventMirrorVaultNewCreds = "VaultNewCreds"
	// EventMirrorInvalidSpec (Warning): a destination regular expression does not
	// compile, or there is none; mirrorStatus Error until the spec is fixed.
	EventMirrorInvalidSpec = "InvalidSpec"
	// EventMirrorCopiesDeleted (Normal): copies keymount wrote were removed (their
	// namespace stopped matching, the source went, or the SecretMirror was
	// deleted with deletePolicy delete).
	EventMirrorCopiesDeleted = "CopiesDeleted"
)

// AnnotationVaultOverwrite set to "true" on a SecretMirror with a Vault
// destination lets it replace a value there that keymount did not write.
const AnnotationVaultOverwrite = "keymount.io/vault-overwrite"

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
	// A Vault source's path, and a dynamic one's lease.
	AnnotationVaultPath          = "mirrors.kts.studio/vault-path"
	AnnotationVaultLeaseID       = "mirrors.kts.studio/vault-lease-id"
	AnnotationVaultLeaseDuration = "mirrors.kts.studio/vault-lease-duration"
)
