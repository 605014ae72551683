// Package convert turns External Secrets manifests into keymount's: an
// External Secrets Operator ExternalSecret (external-secrets.io/v1 or v1beta1) with its
// SecretStore or ClusterSecretStore for AWS Secrets Manager or Parameter
// Store (provider aws) or for Vault's KV engine, version 1 or 2, with
// Kubernetes auth (provider vault), or a Kubernetes External Secrets
// ExternalSecret (kubernetes-client.io/v1, backends secretsManager and
// systemManager), becomes a SecretProviderClass of provider aws or vault
// and a SecretSync that write the same Secret: its name, keys, type, labels
// and annotations, with the refresh policy as keymount annotations and
// ESO's templates as keymount.io/template.<key> annotations. An ESO
// PushSecret (external-secrets.io/v1alpha1) becomes, for each store it
// names, a SecretProviderClass of the store and a keymount.io/v1alpha1
// PushSecret that writes the same values there as the same identity.
//
// What cannot be expressed is never dropped silently: every such field is
// an Issue naming the object and the field path. The caller decides whether
// a partial result may be written.
package convert
