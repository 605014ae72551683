package pushsecret

// Reasons of the Ready condition and of the events on a PushSecret.
const (
	// ReasonSynced (Ready True): every value is in the store as keymount
	// wrote it (or, IfNotExists, someone's value is there).
	ReasonSynced = "Synced"
	// ReasonSecretMissing: the Secret selector.secret names does not exist;
	// nothing is pushed until it does.
	ReasonSecretMissing = "SecretMissing"
	// ReasonKeyMissing: a data[].match.secretKey is not a key of the Secret
	// (or the whole Secret is not UTF-8); nothing is pushed.
	ReasonKeyMissing = "KeyMissing"
	// ReasonInvalid: the spec names one value twice.
	ReasonInvalid = "InvalidSpec"
	// ReasonClassMissing: the SecretProviderClass does not exist.
	ReasonClassMissing = "ClassMissing"
	// ReasonPathNotAllowed: a remote key is outside the prefixes the
	// class's keymount.io/push-paths allows (the admission policy
	// <release>-push-paths refuses such a PushSecret where it is in force);
	// nothing is pushed.
	ReasonPathNotAllowed = "PathNotAllowed"
	// ReasonProviderDoesNotPush: the class's provider does not serve
	// keymount.provider.v1.SecretPusher (every upstream provider).
	ReasonProviderDoesNotPush = "ProviderDoesNotPush"
	// ReasonPushConflict (also a Warning event): the store holds a value
	// keymount did not write, or another writer came first: not replaced.
	ReasonPushConflict = "PushConflict"
	// ReasonPushFailed (also a Warning event): the provider, the store or
	// the identity refused a value; retried.
	ReasonPushFailed = "PushFailed"

	// EventPushed (Normal): values were written or adopted.
	EventPushed = "Pushed"
	// EventRemoved (Normal): values keymount wrote were removed
	// (deletionPolicy Delete).
	EventRemoved = "Removed"
	// EventRemoveSkipped (Warning): deletionPolicy Delete could not remove
	// values (their class is gone, or someone else's version is there):
	// left in the store.
	EventRemoveSkipped = "RemoveSkipped"
)
