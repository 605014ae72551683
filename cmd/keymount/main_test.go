package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestRunDispatch(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{args: nil, code: exitUsage, stderr: "Commands:\n  mount"},
		{args: []string{"help"}, code: exitOK, stdout: "  unmount   unmount a directory"},
		{args: []string{"--help"}, code: exitOK, stdout: "Commands:"},
		{args: []string{"help", "mount"}, code: exitOK, stdout: "--local-root dir"},
		{args: []string{"help", "mount"}, code: exitOK, stdout: "--kubeconfig file"},
		{args: []string{"help", "nope"}, code: exitUsage, stderr: `unknown command "nope"`},
		{args: []string{"version"}, code: exitOK, stdout: "keymount dev ("},
		{args: []string{"version", "x"}, code: exitUsage, stderr: "no arguments"},
		{args: []string{"frobnicate"}, code: exitUsage, stderr: "keymount: unknown command \"frobnicate\" (see keymount --help)\n"},
		{args: []string{"mount", "--no-such-flag"}, code: exitUsage, stderr: "flag provided but not defined: -no-such-flag"},
		{args: []string{"mount", "-h"}, code: exitOK, stderr: "Usage: keymount mount -f class.yaml --target DIR"},
		{args: []string{"mount", "-f", "x.yaml"}, code: exitUsage, stderr: "keymount: mount: --target is required"},
		{args: []string{"mount", "-f", "x.yaml", "--target", "/tmp/x", "extra"}, code: exitUsage, stderr: "no arguments"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := cli(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			if !strings.Contains(stdout, tt.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.stdout, stdout)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, stderr)
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args       []string
		positional []string
		stateDir   string
	}{
		{args: []string{"dir"}, positional: []string{"dir"}, stateDir: "default"},
		{args: []string{"dir", "--state-dir", "s"}, positional: []string{"dir"}, stateDir: "s"},
		{args: []string{"--state-dir=s", "dir"}, positional: []string{"dir"}, stateDir: "s"},
		{args: []string{"a", "--state-dir", "s", "b"}, positional: []string{"a", "b"}, stateDir: "s"},
		{args: []string{"--", "--state-dir", "s"}, positional: []string{"--state-dir", "s"}, stateDir: "default"},
		{args: []string{"a", "--", "-b"}, positional: []string{"a", "-b"}, stateDir: "default"},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		stateDir := fs.String("state-dir", "default", "")
		got, err := parseArgs(fs, tt.args)
		if err != nil {
			t.Errorf("parseArgs(%q): %v", tt.args, err)
			continue
		}
		if !slices.Equal(got, tt.positional) || *stateDir != tt.stateDir {
			t.Errorf("parseArgs(%q) = %q, state-dir %q; want %q, %q", tt.args, got, *stateDir, tt.positional, tt.stateDir)
		}
	}
}
