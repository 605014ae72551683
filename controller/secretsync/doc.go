// Package secretsync is keymount-controller's SecretSync reconciler: it keeps
// the Secret a secret-sync.x-k8s.io/v1alpha1 SecretSync describes filled
// from the SecretSync's SecretProviderClass, as the secrets-store sync
// controller v0.0.5 does, without a pod or a volume.
//
// # One sync
//
// A sync resolves the class (spec.secretProviderClassName, in the
// SecretSync's namespace), mints a token per configured audience for
// spec.serviceAccountName (controller/tokens), sends the provider the
// MountRequest the sync controller sends (controller/syncrequest) with the
// object versions of the last sync, and builds the Secret from the files the
// provider returns: data mapped sourcePath → targetKey, a kubernetes.io/tls
// Secret's tls.crt and tls.key split from PEM or PKCS#12 as secretObjects
// split them (internal/tlsbundle.Part), spec.secretObject's labels and
// annotations, the label secrets-store.sync.x-k8s.io: "" and exactly one
// owner reference, to the SecretSync (controller: true; see the creation
// policies below for the other owners). The Secret is
// written by server-side apply with field manager FieldManager, and only
// when it differs from the Secret in the cache.
//
// # Directories: keymount.io/data-from
//
// The annotation AnnotationDataFrom lists, comma-separated, directories of
// the provider's answer (the AWS provider's extract and find objects answer
// with one, whose files change with the store). Every file directly under
// a listed directory D becomes a key named by the file's name below D; each
// D needs the marker entry {sourcePath: D, targetKey: D} in
// spec.secretObject.data, which writes no key. A missing or different
// marker, an empty list or a name that is no Secret key is an invalid
// SecretSync (ControllerSyncError, before any provider call). A key from
// two places takes External Secrets' precedence: the directories in the
// annotation's order, each overriding those before, then spec.data's keys.
// A file deeper than one level and a file name that is no Secret key fail
// the sync (RemoteSecretStoreFetchFailed) naming files and keys; an empty
// directory gives no keys. A key gone from the answer is
// removed by the next apply, which leaves it out. So that syncHash and the
// comparison with the cached Secret cover whatever keys the directories
// gave, the cache marks the data keys only another field manager owns
// (from managedFields, foreignKeysMark): the directories' keys of the
// Secret are all keys but those, and another writer's keys neither count
// nor make a sync.
//
// # Who owns the Secret: keymount.io/creation-policy, keymount.io/deletion-policy
//
// External Secrets' target.creationPolicy and deletionPolicy, as
// annotations on the SecretSync (policy.go; upstream's spec unchanged),
// with the same values, defaults and outcomes. AnnotationCreationPolicy:
// Owner (the default) writes the one owner reference; Orphan writes none
// (the Secret outlives the SecretSync) and proves ownership by the
// SecretSync's UID in AnnotationSecretSyncUID instead; Merge never creates
// the Secret (ReasonMergeTargetMissing, retried with backoff, the store
// not read) and applies only its keys, labels and annotations, no type and
// no owner reference, so server-side apply keeps every other field
// manager's fields and removes only keys FieldManager alone wrote; deleting
// the SecretSync leaves its keys, as ESO does. None writes nothing and
// calls no provider (Ready=True, ReasonCreationPolicyNone).
// AnnotationDeletionPolicy acts when Mount fails with gRPC NotFound (the
// provider kit's ErrNotFound: the data is gone from the store): Retain (the
// default) keeps the Secret (ProviderError); Delete deletes it, bound to
// its UID (only Owner and Orphan: one the SecretSync created); Merge
// applies no keys, removing the SecretSync's and keeping the Secret and
// others' keys; with keymount.io/data-from, Delete also deletes the Secret
// when an answer leaves it no key (every secret a find matched is gone:
// errNoData). Both report ReasonProviderDataNotFound and retry with
// backoff, so data back in the store is written again. The answer is one
// for the whole class: one object gone of several counts as all. Invalid
// values and ESO's refused combinations (Delete with Merge or None, Merge
// deletion with None) are ControllerSyncError before any store call. The
// policies enter syncHash (with the templates) when not the defaults.
// Orphan and Merge Secrets carry no owner reference, so Secrets are watched
// by name (namesake), not by owner.
//
// # What it refuses
//
// The Secret is always the SecretSync's namesake in the SecretSync's
// namespace. A Secret of that name that does not carry an owner reference to
// this SecretSync (by UID), nor its UID in AnnotationSecretSyncUID, is never
// written (unless the creation policy is Merge): SecretCreated=False with
// reason SecretConflict naming its owner. Once the Secret exists, every
// apply is bound to its UID, so a Secret deleted and re-created by someone
// else in between is not taken over.
//
// # When it syncs
//
// status.syncHash is an HMAC (Hasher) of what the Secret was written from:
// its type, the SHA-256 digest of each data value (the cache holds Secrets
// with digests in place of values, so the hash is taken over them), the labels and annotations of spec.secretObject, the
// SecretSync's UID and forceSynchronization, the class's UID and
// generation. Each reconcile recomputes it from the cached Secret; a
// mismatch (the Secret was edited or deleted, the class changed,
// forceSynchronization changed) or a new generation syncs at once. Otherwise
// the refresh policy decides (package rotation, the same annotations as
// volumes, on the SecretSync or, below it, on its class):
// keymount.io/rotation-policy Periodic | CreatedOnce | OnDemand,
// keymount.io/rotation-interval, keymount.io/rotation-jitter, with
// Config.PollInterval (--rotation-poll-interval) as the default interval;
// a new value of keymount.io/refresh on the SecretSync triggers one
// refresh. A refresh that finds nothing changed writes nothing: not the
// Secret, not the status. A reconcile that finds the cache without the status the
// controller just wrote (the Secret's watch event can come first) waits for
// it (up to 10 s) instead of writing the Secret again.
//
// A failed sync keeps the Secret as it was, sets the failing condition
// (SecretCreated before the Secret exists, SecretUpdated after) and Ready to
// False with v0.0.5's reason, emits a Warning event, and is retried after a
// backoff that doubles per failure (Config.Backoff). The refresh state
// (last refresh, failures) lives in memory; a new leader starts from
// status.lastSuccessfulSyncTime.
//
// # Secrets
//
// Values and tokens go only into the applied Secret and the provider
// request: conditions, events, logs and errors name Secrets, keys, classes
// and objects, never values.
package secretsync
