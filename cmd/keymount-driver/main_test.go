package main

import (
	"context"
	"flag"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

func TestParseFlagsDefaults(t *testing.T) {
	cfg := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), nil)
	if cfg.driver.DriverName != "secrets-store.csi.k8s.io" || cfg.driver.ProviderDir != "/var/run/secrets-store-csi-providers" ||
		cfg.additionalDirs != "/etc/kubernetes/secrets-store-csi-providers" || cfg.providerTimeout != 60*time.Second {
		t.Fatalf("defaults = %+v", cfg)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad size", []string{"--tmpfs-size=lots", "--class-path=" + dir}, "--tmpfs-size"},
		{"no classes", []string{"--state-dir=" + dir}, "--class-path"},
		{"sync without cluster", []string{"--state-dir=" + dir, "--class-path=" + dir, "--sync-secrets"}, "--sync-secrets needs an API server"},
		{"relative state dir", []string{"--state-dir=rel", "--class-path=" + dir}, "state dir"},
		{"relative provider dir", []string{"--state-dir=" + dir, "--class-path=" + dir, "--provider-dir=rel"}, "provider directory \"rel\""},
		{"bad endpoint", []string{"--state-dir=" + dir, "--class-path=" + dir, "--endpoint=tcp://x"}, "--endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), tc.args)
			err := run(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{
		"--state-dir=" + dir, "--class-path=" + dir, "--provider-dir=" + dir,
		"--endpoint=unix://" + filepath.Join(dir, "csi.sock"),
	})
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	sock := filepath.Join(dir, "csi.sock")
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return false, nil //nolint:nilerr // not serving yet
		}
		_ = c.Close()
		return true, nil
	}); err != nil {
		t.Fatalf("the driver never served %s: %v", sock, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run() after cancel = %v, want nil", err)
	}
}
