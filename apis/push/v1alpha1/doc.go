// Package v1alpha1 contains the keymount.io/v1alpha1 API type PushSecret:
// it writes values of a Secret of its namespace into a secret store (AWS
// Secrets Manager, SSM Parameter Store, Vault KV) through the provider of a
// SecretProviderClass, with the identity of a ServiceAccount of its
// namespace.
//
// The spec keeps the External Secrets Operator's PushSecret field names
// (selector.secret, data[].match.secretKey, remoteRef.remoteKey and
// property, updatePolicy, deletionPolicy, refreshInterval); `keymount
// convert` turns an ESO PushSecret into one, its secretStoreRefs into
// secretProviderClassName.
//
// +kubebuilder:object:generate=true
// +groupName=keymount.io
package v1alpha1
