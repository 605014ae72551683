package nodeenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/tests/childproc"
)

// logTailLines is how much of a log LogTail returns.
const logTailLines = 60

// proc is one of the node's processes, logging to <logDir>/<name>.log.
type proc struct {
	name string
	p    *childproc.Proc
}

// start starts binary with args and env (added to the test's environment),
// in a process group of its own, tied to the node's thread: it dies with the
// test binary at the latest.
func (n *Node) start(tb testing.TB, name, binary string, env []string, args ...string) *proc {
	tb.Helper()
	log, err := os.OpenFile(n.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
	defer func() { _ = log.Close() }() // the child has its own descriptor
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := n.forker.Start(cmd)
	if err != nil {
		tb.Fatalf("nodeenv: start %s: %v", name, err)
	}
	return &proc{name: name, p: p}
}

// take empties one of the node's process slots and returns what it held.
func (n *Node) take(slot **proc) *proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := *slot
	*slot = nil
	return p
}

// stop stops p (SIGTERM, then SIGKILL after stopGrace), reporting a process
// that had died, failed or had to be killed.
func (p *proc) stop(tb testing.TB) {
	if p == nil {
		return
	}
	if err := p.p.Stop(stopGrace); err != nil {
		// containerd and kubelet exit with a failure status on SIGTERM at
		// times (a canceled context); only a kill or an earlier death counts.
		if errors.Is(err, childproc.ErrKilled) || errors.Is(err, childproc.ErrExited) {
			tb.Errorf("nodeenv: stopping %s: %v", p.name, err)
		}
	}
}

// Process is a process a test runs on the node (a provider, a store
// emulator); its log is among the node's logs.
type Process struct{ p *proc }

// Run starts binary (a path, or a name in n's binaries: keymount-driver,
// keymount-provider-local, keymount-provider-aws, keymount-provider-vault)
// with args, its log in LogPath(name), and env added to the test's
// environment. It dies with the test binary at the latest; stop it with
// Stop.
func (n *Node) Run(tb testing.TB, name, binary string, env []string, args ...string) *Process {
	tb.Helper()
	if !filepath.IsAbs(binary) {
		binary = filepath.Join(n.bin, binary)
	}
	return &Process{p: n.start(tb, name, binary, env, args...)}
}

// Alive reports whether the process has not exited.
func (p *Process) Alive() bool { return p.p.p.Alive() }

// Stop stops the process (SIGTERM, then SIGKILL), failing the test when it
// had died or had to be killed.
func (p *Process) Stop(tb testing.TB) { p.p.stop(tb) }

// WaitSocket waits until the process serves on the unix socket path.
func (n *Node) WaitSocket(tb testing.TB, p *Process, path string) { n.waitSocket(tb, p.p, path) }

func (n *Node) logPath(name string) string {
	if n.helm != nil && name == "keymount-driver" {
		return n.helm.logs.newestDriverLog()
	}
	return filepath.Join(n.logDir, name+".log")
}

// LogPath is the log file of the node's process called name (containerd,
// kubelet, keymount-driver, keymount-provider-local).
func (n *Node) LogPath(name string) string { return n.logPath(name) }

// LogFiles lists every log the node's processes wrote, the control plane's
// included, and with Options.Helm the logs of the release's containers
// (not the test pods' own output).
func (n *Node) LogFiles(tb testing.TB) []string {
	var out []string
	for _, dir := range []string{n.logDir, filepath.Join(n.logDir, "pods"), filepath.Join(n.Root, "control-plane", "logs")} {
		m, err := filepath.Glob(filepath.Join(dir, "*.log"))
		if err != nil {
			tb.Fatalf("nodeenv: %v", err)
		}
		out = append(out, m...)
	}
	return out
}

// LogTail is the end of the log of the process called name, for failure
// messages.
func (n *Node) LogTail(name string) string {
	data, err := os.ReadFile(n.logPath(name))
	if err != nil {
		return fmt.Sprintf("(%s log: %v)", name, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return fmt.Sprintf("--- %s log (end) ---\n%s", name, bytes.Join(lines, []byte("\n")))
}

// Manifest decodes the objects of the repository's manifest file rel (a
// slash-separated path from the repository root, e.g.
// deploy/providers/vault/rbac.yaml), as unstructured objects.
func (n *Node) Manifest(tb testing.TB, rel string) []client.Object {
	tb.Helper()
	return decodeAll(tb, filepath.Join(n.repo, filepath.FromSlash(rel)))
}

// decodeAll decodes every object of a multi-document YAML file.
func decodeAll(tb testing.TB, path string) []client.Object {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []client.Object
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatalf("nodeenv: %s: %v", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return slices.Clip(out)
}
