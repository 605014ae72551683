package secretsync

// Event reasons keymount-controller adds to the conditions' reasons (a
// created Secret is CreateSuccessful, a failure the failing condition's
// reason).
const (
	// ReasonSecretUpdated (Normal): a refresh changed the Secret; the note
	// names the keys added, changed and removed, never a value.
	ReasonSecretUpdated = "SecretUpdated"
	// ReasonTemplateError (SecretCreated=False or SecretUpdated=False,
	// Ready=False; Warning event): a keymount.io/template.<targetKey>
	// annotation of the SecretSync names an invalid key, does not parse or
	// does not render (a missing object, a failing function, a limit). The
	// message names the annotation, the line and the missing key; the
	// existing Secret is kept as it was.
	ReasonTemplateError = "TemplateError"
)

// MessageFormatTemplateFailed goes with ReasonTemplateError: the error.
const MessageFormatTemplateFailed = "rendering the Secret's templates failed: %v"
