// Package push holds what keymount-controller's writes to secret stores
// share: the metrics of pushes (SecretMirrors with a Vault destination,
// PushSecrets) and of the leases of dynamic Vault sources.
package push
