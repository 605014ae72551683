//go:build tools

// Package vault pins the Vault server the Vault test tier runs (tests/vaultenv):
// HashiCorp Vault v1.14.2, the newest MPL-2.0 release that builds from the Go
// module proxy. hack/install-vault.sh builds it from this module, against a
// patched temporary copy of the sdk module it requires (the script says why);
// the import below only keeps `go mod tidy` from dropping it (a program cannot
// be imported, hence the build tag that no build sets).
package vault

import (
	_ "github.com/hashicorp/vault"
)
