package hostile_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/keymount/keymount/internal/klogtest"
	"github.com/keymount/keymount/internal/unixsocket"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/childproc"
)

// A test binary started with envChildSocket set is not a test run: it is a
// provider child serving on that socket, behaving as envChildMode says.
const (
	envChildSocket = "KEYMOUNT_HOSTILE_CHILD_SOCKET"
	envChildMode   = "KEYMOUNT_HOSTILE_CHILD_MODE"

	// childDies exits in the middle of the first Mount call, before
	// answering; childServes answers every Mount with childFile.
	childDies   = "die"
	childServes = "serve"
	// childDiedCode is the exit code of a child that died in a call.
	childDiedCode = 3
	childFile     = "state"
	childAlive    = "alive"
)

// waitLimit bounds every wait of the suite for a condition: a process
// starting or exiting, a socket serving.
const waitLimit = 30 * time.Second

func TestMain(m *testing.M) {
	if sock := os.Getenv(envChildSocket); sock != "" {
		os.Exit(runChild(sock, os.Getenv(envChildMode)))
	}
	code := m.Run()
	removeBuilt()
	os.Exit(code)
}

// runChild serves a provider on sock until it is killed, or until it dies
// on purpose. It prints "ready" once the socket exists.
func runChild(sock, mode string) int {
	p := &scriptProvider{}
	switch mode {
	case childDies:
		p.set(func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
			os.Exit(childDiedCode) // mid-call: the driver's request is read, no answer is sent
			return nil, nil
		})
	case childServes:
		p.set(answer(fileOf(childFile, childAlive)))
	default:
		fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
		return 2
	}
	l, err := unixsocket.Listen(sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	gs := grpc.NewServer()
	v1alpha1.RegisterCSIDriverProviderServer(gs, p)
	fmt.Println("ready")
	if err := gs.Serve(l); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// proc is a started child process. It dies with the test binary (see
// childproc).
type proc struct {
	cmd    *exec.Cmd
	out    *klogtest.Buffer
	exited chan struct{} // closed once err is set
	err    error         // Wait's answer
}

// startProc starts cmd with its output in a buffer and reaps it when it
// exits.
func startProc(cmd *exec.Cmd) (*proc, error) {
	p := &proc{cmd: cmd, out: &klogtest.Buffer{}, exited: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = p.out
	}
	cmd.Stderr = p.out
	c, err := childproc.Start(cmd)
	if err != nil {
		return nil, err
	}
	go func() { p.err = c.Err(); close(p.exited) }()
	return p, nil
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Kill() // fails only for a process already gone
	p.wait(t)
}

// wait waits until the process has exited and been reaped.
func (p *proc) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(waitLimit):
		t.Fatalf("process %d did not exit within %s", p.cmd.Process.Pid, waitLimit)
	}
}

// startChild starts the test binary as a provider child on sock and waits
// until it says it listens. The test's cleanup kills it.
func startChild(t *testing.T, sock, mode string) *proc {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildSocket+"="+sock, envChildMode+"="+mode)
	cmd.Stdout = w
	p, err := startProc(cmd)
	_ = w.Close() // the child holds its own copy
	if err != nil {
		t.Fatalf("start provider child: %v", err)
	}
	t.Cleanup(func() { p.kill(t) })
	ready := make(chan bool, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		ready <- err == nil && line == "ready\n"
	}()
	select {
	case ok := <-ready:
		if !ok {
			p.wait(t)
			t.Fatalf("provider child did not start: %v\n%s", p.err, p.out)
		}
	case <-time.After(waitLimit):
		t.Fatalf("provider child not ready within %s\n%s", waitLimit, p.out)
	}
	return p
}
