package nodeenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/keymount/keymount/internal/ociimage"
	"github.com/keymount/keymount/tests/poll"
)

// containerdConfig is containerd 1.6's configuration (version 2) for the
// node: everything under the node's root (runc's state too), except the
// shims' sockets, which containerd 1.6 always puts in shimSocketDir (see
// Node.leftoverShimSockets); the CRI plugin with runc through
// cgroupfs, the probe image as the sandbox image, AppArmor off, and
// restrict_oom_score_adj, without which runc fails every sandbox on VMs
// lacking CAP_SYS_RESOURCE ("can't get final child's PID from pipe"). The
// streaming server (exec, attach) listens on 127.0.0.1 only.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %[7]q
        Root = %[10]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
`

// loopbackCNI is the only network configuration: it makes the runtime's
// network ready; the tier's pods use the host's network.
const loopbackCNI = `{"cniVersion": "0.4.0", "name": "keymount-loopback", "plugins": [{"type": "loopback"}]}
`

// containerdSocket is the CRI endpoint kubelet and ctr use.
func (n *Node) containerdSocket() string {
	return filepath.Join(n.Root, "containerd", "containerd.sock")
}

// shimSocketDir is where containerd 1.6 puts its shims' sockets, whatever
// its configured state directory.
const shimSocketDir = "/run/containerd/s"

// shimSockets lists the entries of shimSocketDir.
func shimSockets() map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir(shimSocketDir) // none: no shim ever ran here
	for _, e := range entries {
		out[e.Name()] = true
	}
	return out
}

// leftoverShimSockets lists the shim sockets that appeared while the node
// ran and are still there.
func (n *Node) leftoverShimSockets() []string {
	var out []string
	for name := range shimSockets() {
		if !n.shimSocketsBefore[name] {
			out = append(out, "shim socket "+filepath.Join(shimSocketDir, name))
		}
	}
	return out
}

func (n *Node) startContainerd(tb testing.TB) {
	tb.Helper()
	n.shimSocketsBefore = shimSockets()
	dir := mkdir(tb, n.Root, "containerd")
	cniConf := mkdir(tb, n.Root, "cni")
	if err := os.WriteFile(filepath.Join(cniConf, "10-loopback.conflist"), []byte(loopbackCNI), 0o644); err != nil { //nolint:gosec // G306: a network config, not secret
		tb.Fatalf("nodeenv: %v", err)
	}
	cfg := fmt.Sprintf(containerdConfig,
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), n.containerdSocket(), filepath.Join(dir, "ttrpc.sock"),
		filepath.Join(dir, "opt"), Image, filepath.Join(n.assets, "runc"), filepath.Join(n.assets, "cni"), cniConf,
		filepath.Join(dir, "runc"))
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
	// The shim (containerd-shim-runc-v2) is found on PATH: the assets
	// directory comes first.
	p := n.start(tb, "containerd", filepath.Join(n.assets, "containerd"), []string{"PATH=" + n.assets + ":" + os.Getenv("PATH")},
		"--config", cfgPath, "--log-level", "info")
	n.mu.Lock()
	n.containerd = p
	n.mu.Unlock()
	err := poll.Wait(tb.Context(), startTimeout, func(context.Context) (bool, error) {
		if !p.p.Alive() {
			return false, fmt.Errorf("containerd exited: %w", p.p.Err())
		}
		return serves(n.containerdSocket()), nil
	})
	if err != nil {
		tb.Fatalf("nodeenv: containerd did not start: %v\n%s", err, n.LogTail("containerd"))
	}
}

// ctr runs containerd's client against the node's containerd, in the CRI
// plugin's namespace.
func (n *Node) ctr(ctx context.Context, args ...string) ([]byte, error) {
	full := append([]string{"--address", n.containerdSocket(), "--namespace", "k8s.io"}, args...)
	out, err := exec.CommandContext(ctx, filepath.Join(n.assets, "ctr"), full...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %v: %w: %s", args, err, out)
	}
	return out, nil
}

// importImage packs the probe as the image Image and imports it.
func (n *Node) importImage(tb testing.TB) {
	tb.Helper()
	probe, err := os.ReadFile(filepath.Join(n.bin, "probe"))
	if err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
	img, err := ociimage.Build(ociimage.Spec{
		OS: "linux", Architecture: runtime.GOARCH,
		Files:      []ociimage.File{{Path: "/probe", Mode: 0o755, Data: probe}},
		Entrypoint: []string{"/probe"},
		Cmd:        []string{"pause"},
	})
	if err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
	n.importArchive(tb, Image, img)
}

// importArchive writes img as an image archive named ref and imports it
// into containerd's CRI namespace.
func (n *Node) importArchive(tb testing.TB, ref string, img v1.Image) {
	tb.Helper()
	archive := filepath.Join(n.Root, "image.tar")
	if err := ociimage.WriteArchive(archive, ref, img); err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
	if _, err := n.ctr(tb.Context(), "images", "import", archive); err != nil {
		tb.Fatalf("nodeenv: importing the image %s: %v", ref, err)
	}
	if err := os.Remove(archive); err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
}
