package main

import (
	"flag"
	"io"
	"testing"

	"github.com/keymount/keymount/internal/cliflag/cliflagtest"
	"github.com/keymount/keymount/provider/vault/spec"
)

func parse(t *testing.T, args ...string) *config {
	t.Helper()
	fs := flag.NewFlagSet("keymount-provider-vault", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, err := parseFlags(fs, args)
	if err != nil {
		t.Fatalf("parseFlags %q: %v", args, err)
	}
	return cfg
}

// TestUpstreamFlagsAreDefaults: vault-csi-provider's -vault-addr,
// -vault-mount, -vault-namespace and -vault-tls-* become the provider's
// defaults of the class parameters, with its single-dash spelling; its
// flags keymount does not need are only recorded as given.
func TestUpstreamFlagsAreDefaults(t *testing.T) {
	cfg := parse(t)
	if cfg.provider.Defaults != (spec.Defaults{AuthMount: spec.DefaultAuthMount}) || cfg.provider.Address != "" {
		t.Errorf("defaults without flags: %+v, address %q; want vault-csi-provider's (auth mount kubernetes)", cfg.provider.Defaults, cfg.provider.Address)
	}
	cfg = parse(t, "-vault-addr=https://vault:8200", "-vault-mount=k8s-east", "-vault-namespace=team-a",
		"-vault-tls-ca-cert=/ca.pem", "-vault-tls-ca-directory=/cas", "-vault-tls-server-name=vault.internal",
		"-vault-tls-client-cert=/c.pem", "-vault-tls-client-key=/c.key", "-vault-tls-skip-verify",
		"-endpoint=/provider/vault.sock", "-hmac-secret-name=x", "-debug")
	want := spec.Defaults{AuthMount: "k8s-east", VaultNamespace: "team-a", TLS: spec.TLS{CACert: "/ca.pem", CADir: "/cas",
		ServerName: "vault.internal", ClientCert: "/c.pem", ClientKey: "/c.key", SkipVerify: true}}
	if cfg.provider.Defaults != want || cfg.provider.Address != "https://vault:8200" {
		t.Errorf("defaults %+v address %q, want %+v and https://vault:8200", cfg.provider.Defaults, cfg.provider.Address, want)
	}
	if cfg.server.SocketDir != "/provider" || cfg.server.Name != "vault" {
		t.Errorf("-endpoint: socket dir %q name %q, want /provider and vault", cfg.server.SocketDir, cfg.server.Name)
	}
	given := cfg.upstream.ignored.Given()
	if len(given) != 2 || given["hmac-secret-name"] != "x" || given["debug"] == "" {
		t.Errorf("ignored flags given: %v, want hmac-secret-name and debug only", given)
	}
}

// TestFlagMistakeIsOneLine: keymount-provider-vault's main refuses an
// unknown flag, a bad value and a missing value with one line naming the
// flag and --help, exit 2; --help prints every flag, exit 0.
func TestFlagMistakeIsOneLine(t *testing.T) {
	cliflagtest.CheckMain(t, "keymount-provider-vault", main, []cliflagtest.Mistake{
		{Args: []string{"--foo"}, Flag: "-foo"},
		{Args: []string{"-vault-addr=https://vault:8200", "--reissue-margin=early"}, Flag: "-reissue-margin"},
		{Args: []string{"-vault-tls-skip-verify=perhaps"}, Flag: "-vault-tls-skip-verify"},
		{Args: []string{"--name"}, Flag: "-name"},
	}, "-vault-addr", "-reissue-margin")
}
