package main

import (
	"testing"
	"time"
)

// TestProbeFlags: --probe with the socket flags of the container probes
// that socket, within --probe-timeout; vault-csi-provider's -endpoint
// moves it as it moves the served one.
func TestProbeFlags(t *testing.T) {
	cfg := parse(t, "--probe", "--probe-timeout=3s", "--provider-dir=/run/p", "--name=other")
	if !cfg.probe.On || cfg.probe.Timeout != 3*time.Second || cfg.server.SocketPath() != "/run/p/other.sock" {
		t.Errorf("probe %+v of %s, want on, 3s, /run/p/other.sock", cfg.probe, cfg.server.SocketPath())
	}
	if cfg := parse(t, "--probe", "-endpoint=/provider/v.sock"); cfg.server.SocketPath() != "/provider/v.sock" {
		t.Errorf("--probe -endpoint=/provider/v.sock probes %s", cfg.server.SocketPath())
	}
	if cfg := parse(t); cfg.probe.On {
		t.Error("--probe on by default")
	}
}
