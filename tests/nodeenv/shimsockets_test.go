package nodeenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keymount/keymount/tests/poll"
)

// TestUnixSocketHolders: a bound socket is found with the command line of
// the process holding it (this test's binary); a closed one is not.
func TestUnixSocketHolders(t *testing.T) {
	dir, err := os.MkdirTemp("", "holders")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	held, gone := filepath.Join(dir, "held"), filepath.Join(dir, "gone")
	l, err := net.Listen("unix", held)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	l2, err := net.Listen("unix", gone)
	if err != nil {
		t.Fatal(err)
	}
	ul, ok := l2.(*net.UnixListener)
	if !ok {
		t.Fatalf("listener %T", l2)
	}
	ul.SetUnlinkOnClose(false)
	_ = ul.Close()

	got := unixSocketHolders(dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if cmd, ok := got[held]; !ok || !strings.Contains(cmd, filepath.Base(self)) {
		t.Errorf("holders[%s] = %q, %v; want this test binary (%s)", held, cmd, ok, self)
	}
	if _, ok := got[gone]; ok {
		t.Errorf("holders has the closed socket %s", gone)
	}
	if _, err := os.Stat(gone); err != nil {
		t.Fatalf("the closed socket's file should stay: %v", err)
	}
}

// TestOtherContainerds: a process named containerd without the node's
// configuration is another containerd.
func TestOtherContainerds(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "other", "containerd")
	cmd := exec.Command("/bin/sleep", "infinity")
	cmd.Args[0] = fake // its argv[0], what otherContainerds reads
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Until the child has exec'd, its command line is this test's.
	poll.Until(t, "the fake containerd to run", func(context.Context) (bool, error) {
		got, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		return err == nil && strings.HasPrefix(string(got), fake+"\x00"), nil
	})
	if !otherContainerds(filepath.Join(dir, "ours", "containerd", "containerd.sock")) {
		t.Fatal("a containerd with another configuration runs, and otherContainerds says none")
	}
}
