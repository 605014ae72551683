package main

import (
	"testing"
	"time"
)

// TestProbeFlags: --probe with the socket flags of the container probes
// that socket, within --probe-timeout.
func TestProbeFlags(t *testing.T) {
	cfg := mustParseFlags(t, []string{"--probe", "--probe-timeout=3s", "--provider-dir=/run/p", "--name=other"})
	if !cfg.probe.On || cfg.probe.Timeout != 3*time.Second || cfg.server.SocketPath() != "/run/p/other.sock" {
		t.Errorf("probe %+v of %s, want on, 3s, /run/p/other.sock", cfg.probe, cfg.server.SocketPath())
	}
	if cfg := mustParseFlags(t, nil); cfg.probe.On {
		t.Error("--probe on by default")
	}
}
