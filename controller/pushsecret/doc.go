// Package pushsecret serves keymount.io/v1alpha1 PushSecrets: it writes
// values of a Secret of the PushSecret's namespace into a store through the
// provider of a SecretProviderClass (keymount.provider.v1.SecretPusher),
// with the identity of a ServiceAccount of that namespace, as a SecretSync
// reads. It pushes when the Secret changes (one metadata watch per Secret,
// by name: never every Secret) and every refreshInterval; it records the
// store's version of each value it wrote in status.pushed, so the next
// write is conditional on it and deletionPolicy Delete removes only those.
//
// A value keymount did not write is never replaced unless the PushSecret
// is annotated keymount.io/push-overwrite: the provider compares versions
// and reports a conflict (Ready False, PushConflict).
package pushsecret
