package nodeenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
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
// ran and are still there, and are this node's. shimSocketDir is shared by
// every containerd on the machine, so a second node (another test, another
// make test beside this one) adds sockets of its own: a socket a live shim
// of another containerd holds is that node's, and a socket no process holds
// (its shim is gone) counts as this node's only when no other containerd
// runs, which could have left it too.
func (n *Node) leftoverShimSockets() []string {
	holders := unixSocketHolders(shimSocketDir)
	others := otherContainerds(n.containerdSocket())
	var out []string
	for name := range shimSockets() {
		if n.shimSocketsBefore[name] {
			continue
		}
		path := filepath.Join(shimSocketDir, name)
		cmdline, held := holders[path]
		switch {
		case held && !strings.Contains(cmdline, n.containerdSocket()):
			continue // a live shim of another containerd
		case held:
			out = append(out, "shim socket "+path+" (its shim still runs: "+cmdline+")")
		case others:
			continue // could be another node's shim, gone
		default:
			out = append(out, "shim socket "+path)
		}
	}
	return out
}

// unixSocketHolders maps the path of each bound unix socket in dir of this network
// namespace (/proc/net/unix) to the command line of a process holding it.
func unixSocketHolders(dir string) map[string]string {
	paths := map[string]string{} // inode -> path
	if data, err := os.ReadFile("/proc/net/unix"); err == nil {
		for line := range strings.Lines(string(data)) {
			f := strings.Fields(line)
			if len(f) >= 8 && strings.HasPrefix(f[7], dir+"/") {
				paths[f[6]] = f[7]
			}
		}
	}
	out := map[string]string{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue // not a process, or gone
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			if path, ok := paths[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")]; ok {
				cmd, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
				out[path] = strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")
			}
		}
	}
	return out
}

// otherContainerds says whether a containerd runs whose configuration is
// not the node's (whose grpc socket is ours).
func otherContainerds(ours string) bool {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmd, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || len(cmd) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
		if filepath.Base(args[0]) != "containerd" {
			continue
		}
		cfg := ""
		for i, a := range args {
			if a == "--config" && i+1 < len(args) {
				cfg = args[i+1]
			}
		}
		if cfg == "" || filepath.Dir(cfg) != filepath.Dir(ours) {
			return true
		}
	}
	return false
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
