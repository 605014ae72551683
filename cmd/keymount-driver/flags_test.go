package main

import (
	"flag"
	"testing"

	"github.com/keymount/keymount/internal/cliflag/cliflagtest"
)

// mustParseFlags parses args as the driver's command line, failing the test
// on an error.
func mustParseFlags(t *testing.T, args []string) *config {
	t.Helper()
	return mustParseFlagSet(t, flag.NewFlagSet("keymount-driver", flag.ContinueOnError), args)
}

func mustParseFlagSet(t *testing.T, fs *flag.FlagSet, args []string) *config {
	t.Helper()
	cfg, err := parseFlags(fs, args)
	if err != nil {
		t.Fatalf("parseFlags %q: %v", args, err)
	}
	return cfg
}

// TestFlagMistakeIsOneLine: keymount-driver's main refuses an unknown flag,
// a bad value (of the flag's type, or one the driver cannot use) and a
// missing value with one line naming the flag and --help, exit 2; --help
// prints every flag, exit 0.
func TestFlagMistakeIsOneLine(t *testing.T) {
	cliflagtest.CheckMain(t, "keymount-driver", main, []cliflagtest.Mistake{
		{Args: []string{"--foo"}, Flag: "-foo"},
		{Args: []string{"--endpoint=unix:///x.sock", "--provider-timeout=soon"}, Flag: "-provider-timeout"},
		{Args: []string{"--enable-secret-rotation=maybe"}, Flag: "-enable-secret-rotation"},
		{Args: []string{"--sync-secrets=sometimes"}, Flag: "-sync-secrets"},
		{Args: []string{"--node-id"}, Flag: "-node-id"},
		{Args: []string{"--tmpfs-size=lots"}, Flag: "--tmpfs-size"},
		{Args: []string{"--provider-inflight-bytes=0"}, Flag: "--provider-inflight-bytes"},
		{Args: []string{"--metrics-backend=stackdriver"}, Flag: "--metrics-backend"},
	}, "-endpoint", "-class-path", "-sync-secrets")
}
