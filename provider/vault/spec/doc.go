// Package spec parses a Vault mount request: the class parameters of
// HashiCorp's vault-csi-provider v1.7, unchanged (vaultAddress, roleName,
// vaultAuthMountPath / vaultKubernetesMountPath, vaultNamespace, the TLS
// parameters, audience and the objects YAML), keymount's own
// shareAcrossReplicas, and the volume context the driver adds (pod,
// service account, tokens). Any other parameter or object field is refused
// (known.go), naming the vault-csi-provider release that knows it, unless
// the class lists it in keymount.io/ignore-parameters. Errors name the
// parameter and the fix and never quote a token or a value.
package spec
