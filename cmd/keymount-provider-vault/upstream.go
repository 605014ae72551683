package main

import (
	"flag"

	"github.com/keymount/keymount/internal/ignoredflags"
)

// upstream holds the flags of HashiCorp's vault-csi-provider v1.7 that
// keymount-provider-vault accepts, so its manifests and Helm values run
// unchanged: -endpoint (the socket path) and -vault-addr keep their
// meaning; the rest are accepted and logged once as ignored.
type upstream struct {
	ignored *ignoredflags.Set
}

// ignoredVaultFlags are vault-csi-provider's flags keymount does not need,
// with why.
var ignoredVaultFlags = map[string]ignoredflags.Flag{
	"debug":                  {Usage: "vault-csi-provider: debug logging", Why: "use -v=4", Bool: true},
	"log-level":              {Usage: "vault-csi-provider: log level", Why: "use -v"},
	"health-addr":            {Usage: "vault-csi-provider: health probe address", Why: "the driver checks the provider over its socket"},
	"hmac-secret-name":       {Usage: "vault-csi-provider: Secret of the HMAC key for versions", Why: "versions are KV versions or content hashes: no Secret is read"},
	"cache-size":             {Usage: "vault-csi-provider: size of its token cache", Why: "logins are kept per proven identity while it has a volume"},
	"vault-mount":            {Usage: "vault-csi-provider: default auth mount", Why: "classes name it with vaultAuthMountPath (default kubernetes)"},
	"vault-namespace":        {Usage: "vault-csi-provider: default Vault namespace", Why: "classes name it with vaultNamespace"},
	"vault-tls-ca-cert":      {Usage: "vault-csi-provider: default CA certificate", Why: "classes name it with vaultCACertPath"},
	"vault-tls-ca-directory": {Usage: "vault-csi-provider: default CA directory", Why: "classes name it with vaultCADirectory"},
	"vault-tls-server-name":  {Usage: "vault-csi-provider: default TLS server name", Why: "classes name it with vaultTLSServerName"},
	"vault-tls-client-cert":  {Usage: "vault-csi-provider: default client certificate", Why: "classes name it with vaultTLSClientCertPath"},
	"vault-tls-client-key":   {Usage: "vault-csi-provider: default client key", Why: "classes name it with vaultTLSClientKeyPath"},
	"vault-tls-skip-verify":  {Usage: "vault-csi-provider: skip TLS verification", Why: "classes set vaultSkipTLSVerify", Bool: true},
}

// addUpstreamFlags registers vault-csi-provider's flag names on fs.
func addUpstreamFlags(fs *flag.FlagSet, cfg *config) *upstream {
	fs.StringVar(&cfg.endpoint, "endpoint", "", "vault-csi-provider's socket path (<dir>/<name>.sock); sets --provider-dir and --name")
	fs.StringVar(&cfg.provider.Address, "vault-addr", "", "Vault's address for classes without vaultAddress (vault-csi-provider's flag)")
	return &upstream{ignored: ignoredflags.Register(fs, ignoredVaultFlags)}
}
