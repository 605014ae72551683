package nodeenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/keymount/keymount/tests/poll"
)

// The driver's logging level: the highest, so the tier proves no secret or
// token reaches a log at any level.
const driverVerbosity = "-v=10"

// CSISocket is the driver's CSI endpoint, where the shipped DaemonSet puts
// it under kubelet's root.
func (n *Node) CSISocket() string {
	return filepath.Join(n.KubeletRoot, "plugins", "csi-secrets-store", "csi.sock")
}

// StateDir is the driver's --state-dir (the chart's linux.stateDir).
func (n *Node) StateDir() string { return n.stateDir }

// VolumeStateDir is the driver's directory of the volume with ID id: its
// tmpfs and record (driver/volume names it v-<sha256 of the ID>).
func (n *Node) VolumeStateDir(id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(n.stateDir, "volumes", "v-"+hex.EncodeToString(sum[:]))
}

// StartProvider starts the local provider serving n.ProviderRoot.
func (n *Node) StartProvider(tb testing.TB) {
	tb.Helper()
	p := n.start(tb, "keymount-provider-local", filepath.Join(n.bin, "keymount-provider-local"), nil,
		"--root="+n.ProviderRoot, "--provider-dir="+n.ProviderDir, "--name=local", driverVerbosity)
	n.mu.Lock()
	n.provider = p
	n.mu.Unlock()
	n.waitSocket(tb, p, filepath.Join(n.ProviderDir, "local.sock"))
}

// StartDriver starts keymount-driver as the shipped DaemonSet runs it, with
// kubelet's plugin registration built in (no node-driver-registrar) and
// secret sync on.
func (n *Node) StartDriver(tb testing.TB) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(n.CSISocket()), 0o750); err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
	p := n.start(tb, "keymount-driver", filepath.Join(n.bin, "keymount-driver"), nil,
		"--endpoint=unix://"+n.CSISocket(),
		"--node-id="+n.Name,
		"--driver-name="+DriverName,
		"--provider-dir="+n.ProviderDir,
		"--additional-provider-dirs=",
		"--state-dir="+n.stateDir,
		"--kubelet-root-dir="+n.KubeletRoot,
		"--plugin-registration-dir="+filepath.Join(n.KubeletRoot, "plugins_registry"),
		"--kubelet-registration-path="+n.CSISocket(),
		"--kubeconfig="+n.driverKubeconfig,
		"--sync-secrets",
		"--tmpfs-size=4Mi",
		"--metrics-addr="+net.JoinHostPort("127.0.0.1", fmt.Sprint(freePort(tb))),
		// kubelet's every republish refreshes (the tier waits for
		// kubelet's own republish to carry a change).
		"--enable-secret-rotation", "--rotation-poll-interval=0s",
		driverVerbosity,
	)
	n.mu.Lock()
	n.driver = p
	n.mu.Unlock()
	n.waitSocket(tb, p, n.CSISocket())
}

// RestartDriver stops the driver (SIGTERM, as a DaemonSet rollout does)
// and starts it again.
func (n *Node) RestartDriver(t testing.TB) {
	t.Helper()
	n.take(&n.driver).stop(t)
	n.StartDriver(t)
}

// waitSocket waits until p serves on the unix socket path.
func (n *Node) waitSocket(tb testing.TB, p *proc, path string) {
	tb.Helper()
	err := poll.Wait(tb.Context(), startTimeout, func(context.Context) (bool, error) {
		if !p.p.Alive() {
			return false, fmt.Errorf("%s exited: %w", p.name, p.p.Err())
		}
		return serves(path), nil
	})
	if err != nil {
		tb.Fatalf("nodeenv: %s does not serve %s: %v\n%s", p.name, path, err, n.LogTail(p.name))
	}
}

// serves reports whether something accepts connections on the unix socket
// path.
func serves(path string) bool {
	c, err := net.Dial("unix", path)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
