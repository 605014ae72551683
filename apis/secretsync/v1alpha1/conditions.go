package v1alpha1

// Condition types, reasons and messages of a SecretSync, all in one place.
//
// The sync controller's (kubernetes-sigs/secrets-store-sync-controller
// v0.0.5) are kept with their exact strings, so tools and runbooks written
// for it keep matching: a SecretSync starts with SecretCreated=Unknown
// (SyncStarting) and SecretUpdated=Unknown (NoUpdatesAttemptedYet); a
// success sets SecretCreated=True (CreateSuccessful) or SecretUpdated=True
// (SecretUpToDate); a failure sets the condition of the step it hit to False
// with the failure's reason and a message built from the Message* formats
// below.
//
// keymount adds Ready: True (SecretUpToDate) when the Secret holds what the
// store returned for the current generation, Unknown (SyncStarting) before
// the first sync of a generation, False with the failing condition's reason
// and message otherwise. Its observedGeneration, like
// status.observedGeneration, is the generation it describes.
const (
	// ConditionSecretCreated is about creating the Secret.
	ConditionSecretCreated = "SecretCreated"
	// ConditionSecretUpdated is about keeping the Secret current.
	ConditionSecretUpdated = "SecretUpdated"
	// ConditionReady sums up the SecretSync for tools (kubectl wait, Argo
	// CD): keymount's.
	ConditionReady = "Ready"
)

// Reasons of the sync controller v0.0.5.
const (
	// ReasonSyncStarting (SecretCreated=Unknown, Ready=Unknown): nothing
	// attempted yet for this generation.
	ReasonSyncStarting = "SyncStarting"
	// ReasonNoUpdatesAttemptedYet (SecretUpdated=Unknown): the Secret has
	// not been refreshed since it was created.
	ReasonNoUpdatesAttemptedYet = "NoUpdatesAttemptedYet"
	// ReasonCreateSuccessful (SecretCreated=True): the Secret was created.
	ReasonCreateSuccessful = "CreateSuccessful"
	// ReasonSecretUpToDate (SecretUpdated=True, Ready=True): the Secret
	// holds the last values read from the store.
	ReasonSecretUpToDate = "SecretUpToDate"
	// ReasonProviderError (False): the provider's Mount call failed.
	ReasonProviderError = "ProviderError"
	// ReasonInvalidClusterSecretLabel (False): a label key of
	// spec.secretObject is reserved for the controller.
	ReasonInvalidClusterSecretLabel = "InvalidClusterSecretLabelError"
	// ReasonInvalidClusterSecretAnnotation (False): an annotation key of
	// spec.secretObject is reserved for the controller.
	ReasonInvalidClusterSecretAnnotation = "InvalidClusterSecretAnnotationError"
	// ReasonControllerSyncError (False): the controller failed before
	// calling the provider (a service account token, the parameters) or
	// computing the hash.
	ReasonControllerSyncError = "ControllerSyncError"
	// ReasonControllerPatchError (False): the API server refused the
	// Secret's apply (a guard rail, an invalid label or annotation key).
	ReasonControllerPatchError = "ControllerPatchError"
	// ReasonSecretProviderClassMisconfigured (False): the class is missing
	// from the SecretSync's namespace or names a provider that does not
	// answer.
	ReasonSecretProviderClassMisconfigured = "SecretProviderClassMisconfigured"
	// ReasonRemoteSecretStoreFetchFailed (False): the provider answered but
	// the Secret's data cannot be built from its files (a sourcePath it did
	// not return, a TLS object that does not parse).
	ReasonRemoteSecretStoreFetchFailed = "RemoteSecretStoreFetchFailed"
)

// Reasons keymount adds.
const (
	// ReasonSecretConflict (SecretCreated=False, Ready=False): a Secret of
	// the SecretSync's name exists and is not owned by this SecretSync; the
	// controller leaves it alone and the message names its owner.
	ReasonSecretConflict = "SecretConflict"
)

// Messages of the sync controller v0.0.5: the two fixed ones, and the
// formats of the failure messages (fmt verbs as it uses them).
const (
	// MessageCreateSuccessful goes with ReasonCreateSuccessful.
	MessageCreateSuccessful = "Secret created successfully."
	// MessageSecretUpToDate goes with ReasonSecretUpToDate.
	MessageSecretUpToDate = "Secret contains last observed values."

	// MessageFormatClassNotFound (ReasonSecretProviderClassMisconfigured):
	// the class name, then the error.
	MessageFormatClassNotFound = "failed to get SecretProviderClass %q: %v"
	// MessageFormatFetchFailed (ReasonProviderError,
	// ReasonRemoteSecretStoreFetchFailed, ReasonControllerSyncError before
	// the provider call): the error.
	MessageFormatFetchFailed = "fetching secrets from the provider failed: %v"
	// MessageFormatPatchFailed (ReasonControllerPatchError): the Secret's
	// name, then the API server's error.
	MessageFormatPatchFailed = "failed to patch secret %q: %v"
	// MessageHashFailed (ReasonControllerSyncError).
	MessageHashFailed = "failed to compute state hash"
	// MessageFormatReservedLabel (ReasonInvalidClusterSecretLabel): the
	// reserved key.
	MessageFormatReservedLabel = "label %s is reserved for use by the Secrets Store Sync Controller"
	// MessageFormatReservedAnnotation
	// (ReasonInvalidClusterSecretAnnotation): the reserved key.
	MessageFormatReservedAnnotation = "annotation %s is reserved for use by the Secrets Store Sync Controller"
)
