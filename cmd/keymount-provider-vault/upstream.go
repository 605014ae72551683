package main

import (
	"flag"

	"github.com/keymount/keymount/internal/ignoredflags"
	"github.com/keymount/keymount/provider/vault/spec"
)

// upstream holds the flags of HashiCorp's vault-csi-provider v1.7 that
// keymount-provider-vault accepts, so its manifests and Helm values run
// unchanged. -endpoint (the socket path) and -vault-addr keep their
// meaning, and so do -vault-mount, -vault-namespace and -vault-tls-*: the
// provider's defaults of the class parameters a class does not set (a
// class's parameter wins, field by field). The rest are accepted and
// logged once as ignored.
type upstream struct {
	ignored *ignoredflags.Set
}

// ignoredVaultFlags are vault-csi-provider's flags keymount does not need,
// with why.
var ignoredVaultFlags = map[string]ignoredflags.Flag{
	"debug":            {Usage: "vault-csi-provider: debug logging", Why: "use -v=4", Bool: true},
	"log-level":        {Usage: "vault-csi-provider: log level", Why: "use -v"},
	"health-addr":      {Usage: "vault-csi-provider: health probe address", Why: "the driver checks the provider over its socket"},
	"hmac-secret-name": {Usage: "vault-csi-provider: Secret of the HMAC key for versions", Why: "versions are KV versions or content hashes: no Secret is read"},
	"cache-size":       {Usage: "vault-csi-provider: size of its token cache", Why: "logins are kept per proven identity while it has a volume"},
}

// addUpstreamFlags registers vault-csi-provider's flag names on fs.
func addUpstreamFlags(fs *flag.FlagSet, cfg *config) *upstream {
	d := &cfg.provider.Defaults
	fs.StringVar(&cfg.endpoint, "endpoint", "", "vault-csi-provider's socket path (<dir>/<name>.sock); sets --provider-dir and --name")
	fs.StringVar(&cfg.provider.Address, "vault-addr", "", "Vault's address for classes without vaultAddress (vault-csi-provider's flag)")
	fs.StringVar(&d.AuthMount, "vault-mount", spec.DefaultAuthMount, "auth mount for classes without vaultAuthMountPath (vault-csi-provider's flag)")
	fs.StringVar(&d.VaultNamespace, "vault-namespace", "", "Vault namespace for classes without vaultNamespace (vault-csi-provider's flag)")
	fs.StringVar(&d.TLS.CACert, "vault-tls-ca-cert", "", "PEM CA certificate file for classes without vaultCACertPath; wins over --vault-tls-ca-directory (vault-csi-provider's flag)")
	fs.StringVar(&d.TLS.CADir, "vault-tls-ca-directory", "", "directory of PEM CA certificates for classes without vaultCADirectory (vault-csi-provider's flag)")
	fs.StringVar(&d.TLS.ServerName, "vault-tls-server-name", "", "TLS server name (SNI) for classes without vaultTLSServerName (vault-csi-provider's flag)")
	fs.StringVar(&d.TLS.ClientCert, "vault-tls-client-cert", "", "PEM client certificate file for classes without vaultTLSClientCertPath (vault-csi-provider's flag)")
	fs.StringVar(&d.TLS.ClientKey, "vault-tls-client-key", "", "PEM client key file for classes without vaultTLSClientKeyPath (vault-csi-provider's flag)")
	fs.BoolVar(&d.TLS.SkipVerify, "vault-tls-skip-verify", false, "skip verifying Vault's certificate for classes without vaultSkipTLSVerify; for tests only (vault-csi-provider's flag)")
	return &upstream{ignored: ignoredflags.Register(fs, ignoredVaultFlags)}
}
