package main

import (
	"flag"
	"testing"

	"github.com/keymount/keymount/internal/cliflag/cliflagtest"
)

// mustParseFlags parses args as the provider's command line, failing the
// test on an error.
func mustParseFlags(t *testing.T, args []string) *config {
	t.Helper()
	cfg, err := parseFlags(flag.NewFlagSet("keymount-provider-local", flag.ContinueOnError), args)
	if err != nil {
		t.Fatalf("parseFlags %q: %v", args, err)
	}
	return cfg
}

// TestFlagMistakeIsOneLine: keymount-provider-local's main refuses an
// unknown flag, a bad value and a missing value with one line naming the
// flag and --help, exit 2; --help prints every flag, exit 0.
func TestFlagMistakeIsOneLine(t *testing.T) {
	cliflagtest.CheckMain(t, "keymount-provider-local", main, []cliflagtest.Mistake{
		{Args: []string{"--foo"}, Flag: "-foo"},
		{Args: []string{"--root=/srv", "--version=maybe"}, Flag: "-version"},
		{Args: []string{"--root"}, Flag: "-root"},
	}, "-root", "-allowed-namespaces")
}
